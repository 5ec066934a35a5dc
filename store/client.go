package store

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// RedisMode says how REDIS_URL is read (TURNSTILE_REDIS_MODE): one server,
// a Redis Cluster, or a master found through Redis Sentinel.
type RedisMode string

// The Redis modes.
const (
	// RedisSingle is one server: redis://[user:pass@]host:port[/db].
	RedisSingle RedisMode = "single"
	// RedisCluster is a Redis Cluster, in go-redis's ParseClusterURL form:
	// redis://[user:pass@]h1:p1?addr=h2:p2&addr=h3:p3 (any one node is
	// enough to discover the rest; more are tried when it is down).
	RedisCluster RedisMode = "cluster"
	// RedisSentinel is a master watched by sentinels, in go-redis's
	// ParseFailoverURL form: redis://[suser:spass@]s1:26379?master_name=NAME
	// &addr=s2:26379[&password=…][&db=N]. The user and password before the
	// host are the sentinels'; password= is the data nodes'.
	RedisSentinel RedisMode = "sentinel"
)

// RedisModes lists the modes, the default first.
var RedisModes = []RedisMode{RedisSingle, RedisCluster, RedisSentinel}

// ParseRedisMode reads a TURNSTILE_REDIS_MODE value; "" is RedisSingle.
func ParseRedisMode(s string) (RedisMode, error) {
	switch m := RedisMode(strings.ToLower(strings.TrimSpace(s))); m {
	case "":
		return RedisSingle, nil
	case RedisSingle, RedisCluster, RedisSentinel:
		return m, nil
	}
	return "", errors.New("must be single, cluster or sentinel")
}

// DefaultWaitReplicas is the TURNSTILE_REDIS_WAIT_REPLICAS default of a
// mode: 1 where a failover can promote a replica (cluster, sentinel), so
// that an acknowledged write survives it; 0 for a single server.
func DefaultWaitReplicas(m RedisMode) int {
	if m == RedisCluster || m == RedisSentinel {
		return 1
	}
	return 0
}

// NewRedisClient is NewRedisModeClient in single mode.
func NewRedisClient(rawURL string, timeout time.Duration) (redis.UniversalClient, error) {
	return NewRedisModeClient(RedisSingle, rawURL, timeout)
}

// NewRedisModeClient builds one client for REDIS_URL read in mode m: a
// *redis.Client (single), *redis.ClusterClient (cluster) or a failover
// *redis.Client that follows the sentinels (sentinel). rediss:// turns TLS
// on in every mode (towards the sentinels too). The client is tuned for the
// realtime path: every network step is bounded by timeout and the caller's
// context deadline, a failed command is retried once (not the Lua
// scripts, which may have run when their reply was lost: script.go), and a
// caller waits at most timeout for a pooled connection. go-redis defaults (5 s dial and
// read, 3 retries) would let one dead Redis stall a voice turn for many
// seconds; timeouts in the URL are ignored for the same reason.
//
// A URL that does not fit the mode is refused with an error that names the
// mode it fits. Errors never repeat the URL's passwords. It does not
// connect; the first command does.
func NewRedisModeClient(m RedisMode, rawURL string, timeout time.Duration) (redis.UniversalClient, error) {
	o, err := clientOptions(m, rawURL, timeout)
	if err != nil {
		return nil, err
	}
	return redis.NewUniversalClient(o), nil
}

// clientOptions are NewRedisModeClient's options.
func clientOptions(m RedisMode, rawURL string, timeout time.Duration) (*redis.UniversalOptions, error) {
	if timeout <= 0 {
		return nil, fmt.Errorf("redis client: timeout must be positive, got %v", timeout)
	}
	o, err := redisOptions(m, rawURL)
	if err != nil {
		return nil, err
	}
	o.ContextTimeoutEnabled = true
	o.DialTimeout = timeout
	o.DialerRetries = 1
	o.ReadTimeout = timeout
	o.WriteTimeout = timeout
	o.MaxRetries = 1
	o.PoolTimeout = timeout
	// Maintenance notifications are a Redis Enterprise/Cloud feature; the
	// handshake probe would only add a round trip to every new connection.
	o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	o.ReadBufferSize, o.WriteBufferSize = connBufferSize, connBufferSize
	o.PipelineReadBufferSize, o.PipelineWriteBufferSize = pipelineBufferSize, pipelineBufferSize
	return o, nil
}

// The buffers of one pooled Redis connection. go-redis defaults to 32 KiB
// each way on a command connection and 128 KiB on a pipeline connection,
// sized for bulk reads; the store's commands and batches are a few hundred
// bytes (a history entry, a few counters), and a larger reply or batch
// still goes through, in more reads. At the defaults the pools that a burst
// of session starts opens held 3.9 MB at 200 voice sessions, about 20 KiB
// a session (docs/benchmarks.md, "Active voice sessions' memory").
const (
	connBufferSize     = 4 << 10
	pipelineBufferSize = 16 << 10
)

// CheckRedisURL reports whether rawURL fits mode m, as NewRedisModeClient
// would, without building a client.
func CheckRedisURL(m RedisMode, rawURL string) error {
	_, err := redisOptions(m, rawURL)
	return err
}

// redisOptions reads rawURL in mode m into the universal client's options
// (addresses, credentials, database, TLS, client name, protocol).
func redisOptions(m RedisMode, rawURL string) (*redis.UniversalOptions, error) {
	// Checked before parsing: ParseURL also takes unix:// URLs, which the
	// universal client cannot dial.
	if !strings.HasPrefix(rawURL, "redis://") && !strings.HasPrefix(rawURL, "rediss://") {
		return nil, errors.New("REDIS_URL must start with redis:// or rediss://")
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL is not a valid redis:// or rediss:// URL: %w", redactURLError(err))
	}
	q := u.Query()
	switch m {
	case RedisSingle:
		if q.Has("master_name") {
			return nil, errors.New("REDIS_URL has master_name=, a Sentinel URL: set TURNSTILE_REDIS_MODE=sentinel")
		}
		if q.Has("addr") {
			return nil, errors.New("REDIS_URL has addr= parameters, which list more nodes: set " +
				"TURNSTILE_REDIS_MODE=cluster for a Redis Cluster, or sentinel (with master_name=) for Sentinel")
		}
		opt, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, urlError(m, err)
		}
		return &redis.UniversalOptions{
			Addrs: []string{opt.Addr}, ClientName: opt.ClientName, DB: opt.DB, Protocol: opt.Protocol,
			Username: opt.Username, Password: opt.Password, TLSConfig: opt.TLSConfig,
		}, nil
	case RedisCluster:
		if q.Has("master_name") {
			return nil, errors.New("REDIS_URL has master_name=, a Sentinel URL: set TURNSTILE_REDIS_MODE=sentinel")
		}
		if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
			return nil, errors.New("REDIS_URL names a database, but a Redis Cluster has only database 0: " +
				"drop the path, or set TURNSTILE_REDIS_MODE=single for one server")
		}
		opt, err := redis.ParseClusterURL(rawURL)
		if err != nil {
			return nil, urlError(m, err)
		}
		if opt.ReadOnly || opt.RouteByLatency || opt.RouteRandomly {
			return nil, errors.New("REDIS_URL routes reads to replicas (read_only, route_by_latency or " +
				"route_randomly): a session resumed on another node could miss its latest writes; remove them")
		}
		return &redis.UniversalOptions{
			Addrs: opt.Addrs, IsClusterMode: true, ClientName: opt.ClientName, Protocol: opt.Protocol,
			Username: opt.Username, Password: opt.Password, TLSConfig: perHostTLS(opt.TLSConfig),
		}, nil
	case RedisSentinel:
		if !q.Has("master_name") || q.Get("master_name") == "" {
			return nil, errors.New("REDIS_URL has no master_name=NAME, which sentinel mode needs (the name the " +
				"sentinels monitor, e.g. redis://sentinel:26379?master_name=mymaster); a URL of one server " +
				"needs TURNSTILE_REDIS_MODE=single")
		}
		opt, err := redis.ParseFailoverURL(rawURL)
		if err != nil {
			return nil, urlError(m, err)
		}
		if opt.ReplicaOnly || opt.RouteByLatency || opt.RouteRandomly || opt.UseDisconnectedReplicas {
			return nil, errors.New("REDIS_URL routes commands to replicas (replica_only, route_by_latency, " +
				"route_randomly or use_disconnected_replicas): the session store needs the master; remove them")
		}
		return &redis.UniversalOptions{
			Addrs: opt.SentinelAddrs, MasterName: opt.MasterName, ClientName: opt.ClientName, DB: opt.DB,
			Protocol: opt.Protocol, Username: opt.Username, Password: opt.Password,
			SentinelUsername: opt.SentinelUsername, SentinelPassword: opt.SentinelPassword,
			TLSConfig: perHostTLS(opt.TLSConfig),
		}, nil
	}
	return nil, fmt.Errorf("redis client: unknown mode %q (want single, cluster or sentinel)", m)
}

// perHostTLS drops the server name go-redis pins to the URL's first host:
// the same config dials the other cluster nodes, or the other sentinels and
// the master, whose names it would fail to verify. With no server name,
// each TLS dial verifies the host it dials.
func perHostTLS(c *tls.Config) *tls.Config {
	if c == nil {
		return nil
	}
	c = c.Clone()
	c.ServerName = ""
	return c
}

// urlError wraps a go-redis parse error of REDIS_URL, read in mode m.
func urlError(m RedisMode, err error) error {
	return fmt.Errorf("REDIS_URL is not a valid %s-mode URL: %w", m, redactURLError(err))
}

// redactURLError drops the URL that net/url quotes in its errors: it may
// carry the Redis password.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
