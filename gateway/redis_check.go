package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/settings"
)

// At startup the gateway asks the Redis of REDIS_URL to run the check
// script. What can go wrong falls in two classes:
//
//   - Redis is not there (yet): the connection is refused or times out,
//     the name does not resolve, the connection drops, or Redis answers
//     that it is busy in a way that passes by itself (LOADING, BUSY,
//     TRYAGAIN, MASTERDOWN, CLUSTERDOWN, READONLY during a failover, OOM,
//     max clients). The gateway starts anyway, as it always has: /readyz
//     fails and new sessions are refused until Redis answers, so a gateway
//     may start before its Redis.
//   - Redis is there and refuses this gateway: a wrong user or password
//     (WRONGPASS, NOAUTH), a missing permission (NOPERM), a database index
//     it does not have, TLS that fails (rediss:// to a plain port, a
//     certificate that is not trusted), a cluster node (MOVED), or any other
//     error reply. Waiting does not fix these, so the gateway stops with
//     a message naming the problem and what to change.

//go:embed redis_check.lua
var redisCheckLua string

var redisCheckScript = redis.NewScript(redisCheckLua)

// redisCheckKey is the key the check writes and deletes at once (its TTL
// bounds it should the delete never run).
const redisCheckKey = "turnstile:{startup-check}:probe"

// redisCheckTimeoutFactor bounds the check at this many Redis timeouts:
// room for a dial, a retry and the script.
const redisCheckTimeoutFactor = 4

// checkRedis runs the startup check against rdb. It returns an error only
// for a problem that waiting will not fix; a Redis that is merely
// unreachable is logged and the gateway goes on.
func checkRedis(ctx context.Context, cfg Config, rdb redis.UniversalClient, log *slog.Logger) error {
	if cfg.RedisURL == "" {
		return nil // the embedded miniredis, started just now
	}
	cctx, cancel := context.WithTimeout(ctx, redisCheckTimeoutFactor*cfg.RedisTimeout)
	defer cancel()
	begin := clock.Wall.Now()
	err := runRedisCheck(cctx, rdb)
	if err == nil {
		log.Info("redis ready", "redis", settings.RedactURL(string(cfg.RedisURL)), "check_ms", clock.Wall.Since(begin).Milliseconds())
		return nil
	}
	hint, fatal := redisRefusal(err)
	if !fatal && strings.HasPrefix(string(cfg.RedisURL), "rediss://") && speaksPlainRedis(ctx, rdb, cfg.RedisTimeout) {
		// Plain Redis waits for the end of a command line that a TLS
		// ClientHello never sends, so the handshake only times out.
		hint, fatal = tlsHint, true
		err = fmt.Errorf("%w (the port answers plain, unencrypted Redis)", err)
	}
	if fatal {
		return fmt.Errorf("REDIS_URL=%s: Redis refused this gateway: %v; %s", settings.RedactURL(string(cfg.RedisURL)), err, hint)
	}
	log.Warn("redis not reachable at startup; starting anyway: /readyz fails and new sessions are refused until it answers",
		"redis", settings.RedactURL(string(cfg.RedisURL)), "err", err)
	return nil
}

// redisRefusal classifies an error of the startup check: fatal when Redis
// (or the TLS layer in front of it) refused this gateway for a reason that
// will not pass by itself, with a hint of what to change; not fatal when
// Redis could not be reached or is busy for a while.
func redisRefusal(err error) (hint string, fatal bool) {
	var redisErr redis.Error
	switch {
	case redis.IsAuthError(err) || redis.HasErrorPrefix(err, "AUTH") || redis.HasErrorPrefix(err, "invalid password") ||
		redis.HasErrorPrefix(err, "Client sent AUTH"):
		return "check the user name and password in REDIS_URL (redis://USER:PASSWORD@HOST:PORT/DB, or " +
			"redis://:PASSWORD@HOST:PORT/DB for the default user)", true
	case redis.IsPermissionError(err):
		return "the Redis user lacks a permission the gateway needs: it reads and writes keys turnstile:*, in " +
			"transactions and Lua scripts: ACL SETUSER <user> ~turnstile:* &turnstile:* " + redisACLCategories, true
	case isTLSError(err):
		return tlsHint, true
	case isMoved(err):
		return "this Redis is a cluster node: set TURNSTILE_REDIS_MODE=cluster (REDIS_URL may list more nodes " +
			"with addr=)", true
	case redis.IsLoadingError(err), redis.IsReadOnlyError(err), redis.IsClusterDownError(err), redis.IsTryAgainError(err),
		redis.IsMasterDownError(err), redis.IsMaxClientsError(err), redis.IsOOMError(err), redis.HasErrorPrefix(err, "BUSY"):
		return "", false
	case redis.HasErrorPrefix(err, "DB index is out of range") || redis.HasErrorPrefix(err, "invalid DB index") ||
		redis.HasErrorPrefix(err, "SELECT"):
		return "REDIS_URL selects a database this Redis does not have (the /DB at the end of the URL); use /0, or a " +
			"number below the server's `databases` setting", true
	case errors.As(err, &redisErr):
		return "Redis answered the check with an error; see its message", true
	}
	return "", false
}

// redisACLCategories are the command categories the gateway's Redis user
// needs (docs/operations.md; a test runs a gateway as such a user): pub/sub
// carries session ownership between nodes (channel turnstile:owners).
const redisACLCategories = "+@read +@write +@keyspace +@transaction +@scripting +@connection +@pubsub"

const tlsHint = "TLS to Redis failed: a rediss:// URL needs Redis serving TLS on that port with a certificate this " +
	"machine trusts; use redis:// for plain TCP"

// runRedisCheck does what the session store does, once: a transaction
// (MULTI/EXEC) and a Lua script that write and delete a key of the
// gateway's namespace.
func runRedisCheck(ctx context.Context, rdb redis.UniversalClient) error {
	cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, redisCheckKey, "1", 10*time.Second)
		p.Del(ctx, redisCheckKey)
		return nil
	})
	if err != nil {
		// EXECABORT says only that a command was refused; say which and why.
		for _, c := range cmds {
			if cerr := c.Err(); cerr != nil && !redis.IsExecAbortError(cerr) {
				return cerr
			}
		}
		return err
	}
	return redisCheckScript.Run(ctx, rdb, []string{redisCheckKey}).Err()
}

// speaksPlainRedis reports whether the address of rdb answers a plain-text
// PING with a RESP reply (+PONG, or an error such as -NOAUTH): a Redis
// without TLS.
func speaksPlainRedis(ctx context.Context, rdb redis.UniversalClient, timeout time.Duration) bool {
	c, ok := rdb.(*redis.Client)
	if !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", c.Options().Addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	if _, err := io.WriteString(conn, "PING\r\n"); err != nil {
		return false
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(conn, b); err != nil {
		return false
	}
	return b[0] == '+' || b[0] == '-'
}

func isMoved(err error) bool {
	_, moved := redis.IsMovedError(err)
	_, ask := redis.IsAskError(err)
	return moved || ask
}

// isTLSError reports whether err comes from the TLS handshake: the peer
// does not speak TLS, its certificate is not trusted or does not match, or
// it refused ours.
func isTLSError(err error) bool {
	var (
		header    tls.RecordHeaderError
		verify    *tls.CertificateVerificationError
		alert     tls.AlertError
		authority x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
	)
	return errors.As(err, &header) || errors.As(err, &verify) || errors.As(err, &alert) ||
		errors.As(err, &authority) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		strings.HasPrefix(err.Error(), "tls: ")
}
