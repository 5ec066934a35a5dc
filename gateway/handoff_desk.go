package gateway

// The desk the sessions tell of hand-offs to a person (request_human,
// docs/tools.md); its settings are the handoff package's
// (handoff/settings.go).

import (
	"log/slog"

	"github.com/turnstile-gw/turnstile/handoff"
	"github.com/turnstile-gw/turnstile/metrics"
)

// handoffDesk is the desk the sessions tell of hand-offs: signed with the
// hand-off secret, else the tools' one.
func handoffDesk(cfg Config, m *metrics.Metrics, gw *gateway, log *slog.Logger) *handoff.Desk {
	secret := cfg.HandoffSigningSecret
	if secret == "" {
		secret = cfg.ToolsSigningSecret
	}
	desk := handoff.New(handoff.Config{URL: cfg.HandoffURL, Secret: []byte(secret), Clock: cfg.Clock}, m,
		log.With("component", "handoff"))
	gw.closers = append(gw.closers, desk.Close)
	if cfg.HandoffURL != "" && secret == "" {
		log.Warn("TURNSTILE_HANDOFF_URL is set but no signing secret: the help desk cannot tell the gateway's POSTs " +
			"from anyone's; set TURNSTILE_HANDOFF_SIGNING_SECRET or TURNSTILE_TOOLS_SIGNING_SECRET")
	}
	return desk
}
