package gateway

// Settings of the hand-off to a person (request_human, docs/tools.md): the
// help desk's URL and the key its POSTs are signed with.

import (
	"fmt"
	"log/slog"

	"github.com/turnstile-gw/turnstile/handoff"
	"github.com/turnstile-gw/turnstile/internal/settings"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/tools"
)

func handoffSettings() []configSetting {
	return []configSetting{
		{Env: "TURNSTILE_HANDOFF_URL", DefDoc: "unset: hand-offs reach the browser, the timeline and the event stream only",
			Usage: "http(s) URL that receives a signed JSON POST when the model hands a conversation to a person (request_human), " +
				"retried on 5xx, 408, 429 and network errors, 4 attempts",
			Apply: func(c *Config, v string) error {
				if v == "" {
					return nil
				}
				if _, err := settings.AbsoluteURL(v, "http", "https"); err != nil {
					return err
				}
				c.HandoffURL = v
				return nil
			}},
		{Env: "TURNSTILE_HANDOFF_SIGNING_SECRET", DefDoc: "unset: TURNSTILE_TOOLS_SIGNING_SECRET, else unsigned", Secret: true,
			Usage: fmt.Sprintf("HMAC-SHA256 key of the Turnstile-Signature header on the hand-off POST (the scheme of tool requests), "+
				"at least %d bytes; unset, the tools' signing secret signs it (prefer the environment: flags show in ps)", tools.MinSigningSecretBytes),
			Apply: func(c *Config, v string) error {
				if err := tools.CheckSigningSecret(v); err != nil || v == "" {
					return err
				}
				c.HandoffSigningSecret = Secret(v)
				return nil
			}},
	}
}

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
