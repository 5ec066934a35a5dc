package server

// The edge's own settings: its HTTP timeouts, connection and session caps,
// the proxies in front of it, and the connections that have not
// authenticated. Each is a row of a table the gateway lifts into its own.

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/turnstile-gw/turnstile/internal/settings"
)

// Edge are the listener's limits. Zero values take the defaults noted; a
// zero limit is no limit.
type Edge struct {
	HTTPReadHeaderTimeout time.Duration // default DefaultReadHeaderTimeout
	HTTPIdleTimeout       time.Duration // keep-alive; default DefaultIdleTimeout
	HTTPMaxHeaderBytes    int           // default DefaultMaxHeaderBytes
	// MaxConnections caps open connections on the public listener (see
	// LimitListener); 0: no cap.
	MaxConnections int
	// MaxSessions caps upgraded connections on this node (HTTP 503 beyond).
	MaxSessions int
	// MaxSessionsPerUser caps one user's open connections across all
	// nodes (HTTP 429 beyond); needs Deps.Leases. Not applied in dev mode.
	MaxSessionsPerUser int
	// UserLeaseTTL is the life of a per-user lease without renewal;
	// default DefaultLeaseTTL.
	UserLeaseTTL time.Duration
	// TrustedProxies are the proxies whose X-Forwarded-For or Forwarded
	// name the client (in logs, the session and UnauthPerIP); empty: the
	// TCP peer is.
	TrustedProxies TrustedProxies
	// UnauthPerIP caps the unauthenticated connections (not upgraded yet)
	// of one client IP (an IPv6 /64) on the public listener; 0: no cap.
	// Not applied in dev mode. See unauth.go.
	UnauthPerIP int
	// UnauthShare is the share of MaxConnections unauthenticated
	// connections may hold together (0 or 1: no cap of their own).
	UnauthShare float64
	// UnauthIdleTimeout closes an unauthenticated keep-alive connection
	// with no request (not a trusted proxy's: those keep HTTPIdleTimeout);
	// default DefaultUnauthIdleTimeout.
	UnauthIdleTimeout time.Duration
}

// EdgeSettings are the rows of the HTTP limits and the connection and
// session caps. TURNSTILE_MAX_CONNECTIONS and TURNSTILE_MAX_SESSIONS are
// left at 0 when unset: their defaults depend on the open-file limit and on
// each other, which the gateway resolves.
func EdgeSettings() []settings.Setting[Edge] {
	return []settings.Setting[Edge]{
		settings.Duration("TURNSTILE_HTTP_READ_HEADER_TIMEOUT", "5s", "a request's headers must arrive within this, or the connection is closed", time.Nanosecond,
			func(e *Edge) *time.Duration { return &e.HTTPReadHeaderTimeout }),
		settings.Duration("TURNSTILE_HTTP_IDLE_TIMEOUT", "60s", "an idle keep-alive connection is closed after this", time.Nanosecond,
			func(e *Edge) *time.Duration { return &e.HTTPIdleTimeout }),
		settings.Int("TURNSTILE_HTTP_MAX_HEADER_BYTES", 16<<10, "largest request headers accepted, in bytes (431 beyond)", 8<<10, 1<<20,
			func(e *Edge) *int { return &e.HTTPMaxHeaderBytes }),
		{Env: "TURNSTILE_MAX_CONNECTIONS", DefDoc: "what the open-file limit leaves after 256 for Redis, the model's HTTP and files (shared with voice sessions' model connections)",
			Usage: "open connections on the public listener; more are closed at accept (at least 1, and room must remain below the open-file limit)",
			Apply: settings.OptionalInt(1, func(e *Edge) *int { return &e.MaxConnections })},
		{Env: "TURNSTILE_MAX_SESSIONS", DefDoc: "10000, or 90% of TURNSTILE_MAX_CONNECTIONS if lower",
			Usage: "WebSocket sessions on this node; more are refused with HTTP 503 and Retry-After before the upgrade (at least 1)",
			Apply: settings.OptionalInt(1, func(e *Edge) *int { return &e.MaxSessions })},
		settings.Int("TURNSTILE_MAX_SESSIONS_PER_USER", 10, "open WebSocket connections of one user across all nodes; more are refused with HTTP 429 and Retry-After (0: no limit; not applied in dev mode)", 0, -1,
			func(e *Edge) *int { return &e.MaxSessionsPerUser }),
		settings.Duration("TURNSTILE_USER_LEASE_TTL", "30s", "how long a connection still counts for its user after its node stopped renewing it (died); renewed three times per TTL", time.Second,
			func(e *Edge) *time.Duration { return &e.UserLeaseTTL }),
	}
}

// ProxySettings is the row of the proxies whose forwarding headers name the
// client.
func ProxySettings() []settings.Setting[Edge] {
	return []settings.Setting[Edge]{
		{Env: "TURNSTILE_TRUSTED_PROXIES", DefDoc: "unset: the TCP peer is the client",
			Usage: "comma-separated CIDRs or IPs of the proxies in front of the gateway, e.g. 10.0.0.0/8; their X-Forwarded-For (or Forwarded) names the client, anyone else's is ignored",
			Apply: func(e *Edge, v string) error {
				p, err := ParseTrustedProxies(v)
				if err != nil {
					return err
				}
				e.TrustedProxies = p
				return nil
			}},
	}
}

// UnauthSettings limit the connections that have not authenticated (not
// upgraded yet): page loads, health checks, refused upgrades, idlers
// (docs/operations.md, "Unauthenticated connections").
func UnauthSettings() []settings.Setting[Edge] {
	return []settings.Setting[Edge]{
		// 32: a browser loading the page opens up to six; a few users behind
		// one NAT a few times that.
		settings.Int("TURNSTILE_UNAUTH_PER_IP", 32, "connections that have not authenticated (no WebSocket upgrade yet) one client IP (an IPv6 /64; behind TURNSTILE_TRUSTED_PROXIES the forwarded client) may hold on this node; beyond it its connection idle the longest is closed, or the new one refused; 0: no limit; not applied in dev mode", 0, -1,
			func(e *Edge) *int { return &e.UnauthPerIP }),
		{Env: "TURNSTILE_UNAUTH_SHARE", Def: "0.25",
			Usage: "share of TURNSTILE_MAX_CONNECTIONS that connections that have not authenticated may hold together; beyond it the one idle the longest is closed, or the new one refused, so that the rest is always there for upgrades (more than 0, at most 1: no share of their own)",
			Apply: func(e *Edge, v string) error {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				switch {
				case err != nil || math.IsNaN(f):
					return errors.New("not a number")
				case f <= 0 || f > 1:
					return errors.New("must be more than 0 and at most 1 (0.25: a quarter of the connections)")
				}
				e.UnauthShare = f
				return nil
			}},
		settings.Duration("TURNSTILE_UNAUTH_IDLE_TIMEOUT", "10s", "a connection that has not authenticated is closed after this long without a request (a trusted proxy's keep TURNSTILE_HTTP_IDLE_TIMEOUT; before its first request TURNSTILE_HTTP_READ_HEADER_TIMEOUT applies)", time.Millisecond,
			func(e *Edge) *time.Duration { return &e.UnauthIdleTimeout }),
	}
}
