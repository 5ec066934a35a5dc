package handoff

// The hand-off's settings (request_human, docs/tools.md): the help desk's
// URL and the key its POSTs are signed with. Rows of the table the gateway
// lifts into its own (internal/settings).

import (
	"fmt"

	"github.com/turnstile-gw/turnstile/internal/settings"
	"github.com/turnstile-gw/turnstile/internal/signature"
)

// HelpDesk is where a hand-off is POSTed and the key it is signed with.
type HelpDesk struct {
	HandoffURL string // TURNSTILE_HANDOFF_URL; "" = no help desk POST
	// HandoffSigningSecret is TURNSTILE_HANDOFF_SIGNING_SECRET; "": the
	// tools' signing secret signs it (the gateway falls back), else unsigned.
	HandoffSigningSecret settings.Secret
}

// HelpDeskSettings are the rows of the help desk's URL and signing secret.
func HelpDeskSettings() []settings.Setting[HelpDesk] {
	return []settings.Setting[HelpDesk]{
		{Env: "TURNSTILE_HANDOFF_URL", DefDoc: "unset: hand-offs reach the browser, the timeline and the event stream only",
			Usage: "http(s) URL that receives a signed JSON POST when the model hands a conversation to a person (request_human), " +
				"retried on 5xx, 408, 429 and network errors, 4 attempts",
			Apply: func(h *HelpDesk, v string) error {
				if v == "" {
					return nil
				}
				if _, err := settings.AbsoluteURL(v, "http", "https"); err != nil {
					return err
				}
				h.HandoffURL = v
				return nil
			}},
		{Env: "TURNSTILE_HANDOFF_SIGNING_SECRET", DefDoc: "unset: TURNSTILE_TOOLS_SIGNING_SECRET, else unsigned", Secret: true,
			Usage: fmt.Sprintf("HMAC-SHA256 key of the Turnstile-Signature header on the hand-off POST (the scheme of tool requests), "+
				"at least %d bytes; unset, the tools' signing secret signs it (prefer the environment: flags show in ps)", signature.MinSecretBytes),
			Apply: func(h *HelpDesk, v string) error {
				if err := signature.CheckSecret(v); err != nil || v == "" {
					return err
				}
				h.HandoffSigningSecret = settings.Secret(v)
				return nil
			}},
	}
}
