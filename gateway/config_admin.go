package gateway

// Settings of the admin listener's operator actions (the timelines and the
// event stream it reads are the store's: store/settings.go).

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/turnstile-gw/turnstile/internal/settings"
	"github.com/turnstile-gw/turnstile/server"
)

func adminSettings() []configSetting {
	return []configSetting{
		{Env: "TURNSTILE_ADMIN_TOKEN", DefDoc: "unset: the admin listener must be on loopback", Secret: true,
			Usage: fmt.Sprintf("bearer token every admin route but /healthz and /readyz requires (at least %d bytes); required when TURNSTILE_ADMIN_ADDR is not loopback", server.MinAdminTokenBytes),
			Apply: func(c *Config, v string) error {
				switch {
				case v == "":
					return nil
				case strings.ContainsFunc(v, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
					return errors.New("contains whitespace or control characters")
				case len(v) < server.MinAdminTokenBytes:
					return fmt.Errorf("must be at least %d bytes (e.g. openssl rand -hex 32)", server.MinAdminTokenBytes)
				}
				c.AdminToken = Secret(v)
				return nil
			}},
		{Env: "TURNSTILE_ADMIN_METRICS_OPEN", Def: "false",
			Usage: "true: /metrics answers without TURNSTILE_ADMIN_TOKEN (for a scraper that cannot send it); the other admin routes still need it",
			Apply: settings.Bool(func(c *Config) *bool { return &c.AdminMetricsOpen })},
	}
}

// adminChecks refuses an admin listener off loopback without a token:
// it serves session timelines and operator actions.
func adminChecks(c *Config, failed map[string]bool, shown map[string]string) []error {
	if failed["TURNSTILE_ADMIN_ADDR"] || failed["TURNSTILE_ADMIN_TOKEN"] || isLoopbackAddr(c.AdminAddr) || c.AdminToken != "" {
		return nil
	}
	return []error{fmt.Errorf("%s: is not loopback, so TURNSTILE_ADMIN_TOKEN (at least %d bytes) is required: the admin "+
		"listener serves conversations and operator actions; set it (e.g. openssl rand -hex 32) or listen on 127.0.0.1",
		shown["TURNSTILE_ADMIN_ADDR"], server.MinAdminTokenBytes)}
}
