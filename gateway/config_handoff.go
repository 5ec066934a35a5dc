package gateway

// Settings of the hand-off to a person (request_human, docs/tools.md): the
// help desk's URL and the key its POSTs are signed with.

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/turnstile-gw/turnstile/handoff"
	"github.com/turnstile-gw/turnstile/internal/settings"
	"github.com/turnstile-gw/turnstile/metrics"
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
				"at least %d bytes; unset, the tools' signing secret signs it (prefer the environment: flags show in ps)", minToolsSigningSecret),
			Apply: func(c *Config, v string) error {
				if err := checkSigningSecret(v); err != nil || v == "" {
					return err
				}
				c.HandoffSigningSecret = Secret(v)
				return nil
			}},
	}
}

// checkSigningSecret refuses an HMAC key a receiver could guess or a
// header could not carry; "" is no key.
func checkSigningSecret(v string) error {
	switch {
	case v == "":
		return nil
	case len(v) < minToolsSigningSecret:
		return fmt.Errorf("must be at least %d bytes", minToolsSigningSecret)
	case strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return errors.New("contains control characters")
	}
	return nil
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
