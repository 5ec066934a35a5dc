package gateway

// Phone calls on the public listener; their settings are the telephony
// package's (telephony/settings.go).

import (
	"crypto/rand"
	"log/slog"

	"github.com/turnstile-gw/turnstile/server"
	"github.com/turnstile-gw/turnstile/telephony"
	"github.com/turnstile-gw/turnstile/telephony/twilio"
)

// TelephonyOn reports whether the phone routes are served: with a Twilio
// auth token (every request signed), or on a loopback address (a developer
// trying calls with `gateway call`). A public gateway without a token does
// not take calls: anyone could post a webhook.
func (c Config) TelephonyOn() bool { return c.TwilioAuthToken != "" || server.IsLoopbackAddr(c.Addr) }

// telephonyEdge is the Twilio carrier on the public listener, or nil when
// calls are off. The call parameters are signed with a key derived from the
// auth token, which every node of a fleet shares; without one (loopback
// only) the key is this process's own.
func telephonyEdge(cfg Config, log *slog.Logger, starts server.CallStarts) *server.Telephony {
	if !cfg.TelephonyOn() {
		log.Warn("phone calls are off: TWILIO_AUTH_TOKEN is unset and the address is not loopback; " +
			"set it to serve /v1/telephony/twilio")
		return nil
	}
	key := []byte(cfg.TwilioAuthToken)
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
		log.Warn("phone calls unsigned: TWILIO_AUTH_TOKEN is unset (allowed on loopback only)")
	} else if cfg.PublicURL == "" {
		log.Warn("TURNSTILE_PUBLIC_URL is unset: Twilio's signatures are checked against the request's own host, " +
			"which fails behind a proxy that rewrites it")
	}
	return &server.Telephony{Carrier: &twilio.Carrier{AuthToken: string(cfg.TwilioAuthToken)},
		Signer: telephony.NewSigner(key, cfg.Clock.Now), PublicURL: cfg.PublicURL, Starts: starts}
}
