package telephony

// The phone calls' own settings: the gateway's public URL, which carriers
// sign and stream to, and Twilio's auth token. Each is a row of a table the
// gateway lifts into its own.

import (
	"errors"
	"net/url"
	"strings"

	"github.com/turnstile-gw/turnstile/internal/settings"
)

// Calls are the phone calls' settings.
type Calls struct {
	// PublicURL is the gateway's public base URL as callers reach it,
	// without a trailing slash; "" is the request's own host.
	PublicURL string
	// TwilioAuthToken checks X-Twilio-Signature and keys the signed call
	// parameters; "" is unsigned calls, which the gateway allows on
	// loopback only.
	TwilioAuthToken settings.Secret
}

// CallSettings are the rows of the phone calls' settings.
func CallSettings() []settings.Setting[Calls] {
	return []settings.Setting[Calls]{
		{Env: "TURNSTILE_PUBLIC_URL", DefDoc: "unset: the request's own host (a gateway reached directly)",
			Usage: "the gateway's public base URL as callers reach it (https://gw.example.com, behind any proxy): the URL carriers sign, and the base of the stream URL in TwiML",
			Apply: parsePublicURL},
		{Env: "TWILIO_AUTH_TOKEN", DefDoc: "unset: phone calls only on a loopback address, unsigned", Secret: true,
			Usage: "the Twilio account's auth token: X-Twilio-Signature is checked on the voice webhook and the stream upgrade, and the call parameters are signed with a key derived from it (prefer the environment: flags show in ps)",
			Apply: settings.Key(func(c *Calls) *settings.Secret { return &c.TwilioAuthToken })},
	}
}

func parsePublicURL(c *Calls, v string) error {
	if v == "" {
		c.PublicURL = ""
		return nil
	}
	u, err := url.Parse(v)
	switch {
	case err != nil:
		return errors.New("is not a URL")
	case u.Scheme != "https" && u.Scheme != "http":
		return errors.New("must be an http or https URL")
	case u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return errors.New("must be scheme://host[:port][/path], without user, query or fragment")
	}
	c.PublicURL = strings.TrimRight(v, "/")
	return nil
}
