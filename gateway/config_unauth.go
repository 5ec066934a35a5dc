package gateway

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/turnstile-gw/turnstile/internal/settings"
)

// unauthSettings limit the connections that have not authenticated (not
// upgraded yet): page loads, health checks, refused upgrades, idlers
// (docs/operations.md, "Unauthenticated connections").
func unauthSettings() []configSetting {
	return []configSetting{
		// 32: a browser loading the page opens up to six; a few users behind
		// one NAT a few times that.
		settings.Int("TURNSTILE_UNAUTH_PER_IP", 32, "connections that have not authenticated (no WebSocket upgrade yet) one client IP (an IPv6 /64; behind TURNSTILE_TRUSTED_PROXIES the forwarded client) may hold on this node; beyond it its connection idle the longest is closed, or the new one refused; 0: no limit; not applied in dev mode", 0, -1,
			func(c *Config) *int { return &c.UnauthPerIP }),
		{Env: "TURNSTILE_UNAUTH_SHARE", Def: "0.25",
			Usage: "share of TURNSTILE_MAX_CONNECTIONS that connections that have not authenticated may hold together; beyond it the one idle the longest is closed, or the new one refused, so that the rest is always there for upgrades (more than 0, at most 1: no share of their own)",
			Apply: func(c *Config, v string) error {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				switch {
				case err != nil || math.IsNaN(f):
					return errors.New("not a number")
				case f <= 0 || f > 1:
					return errors.New("must be more than 0 and at most 1 (0.25: a quarter of the connections)")
				}
				c.UnauthShare = f
				return nil
			}},
		settings.Duration("TURNSTILE_UNAUTH_IDLE_TIMEOUT", "10s", "a connection that has not authenticated is closed after this long without a request (a trusted proxy's keep TURNSTILE_HTTP_IDLE_TIMEOUT; before its first request TURNSTILE_HTTP_READ_HEADER_TIMEOUT applies)", time.Millisecond,
			func(c *Config) *time.Duration { return &c.UnauthIdleTimeout }),
	}
}
