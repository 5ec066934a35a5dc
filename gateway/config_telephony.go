package gateway

// The settings of phone calls (telephony): the gateway's public URL, which
// carriers sign and stream to, and Twilio's auth token.

import (
	"crypto/rand"
	"errors"
	"log/slog"
	"net/url"
	"strings"

	"github.com/turnstile-gw/turnstile/server"
	"github.com/turnstile-gw/turnstile/telephony"
	"github.com/turnstile-gw/turnstile/telephony/twilio"
)

func telephonySettings() []configSetting {
	return []configSetting{
		{Env: "TURNSTILE_PUBLIC_URL", DefDoc: "unset: the request's own host (a gateway reached directly)",
			Usage: "the gateway's public base URL as callers reach it (https://gw.example.com, behind any proxy): the URL carriers sign, and the base of the stream URL in TwiML",
			Apply: parsePublicURL},
		{Env: "TWILIO_AUTH_TOKEN", DefDoc: "unset: phone calls only on a loopback address, unsigned", Secret: true,
			Usage: "the Twilio account's auth token: X-Twilio-Signature is checked on the voice webhook and the stream upgrade, and the call parameters are signed with a key derived from it (prefer the environment: flags show in ps)",
			Apply: parseKey(func(c *Config) *Secret { return &c.TwilioAuthToken })},
	}
}

func parsePublicURL(c *Config, v string) error {
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

// TelephonyOn reports whether the phone routes are served: with a Twilio
// auth token (every request signed), or on a loopback address (a developer
// trying calls with `gateway call`). A public gateway without a token does
// not take calls: anyone could post a webhook.
func (c Config) TelephonyOn() bool { return c.TwilioAuthToken != "" || isLoopbackAddr(c.Addr) }

// telephonyEdge is the Twilio carrier on the public listener, or nil when
// calls are off. The call parameters are signed with a key derived from the
// auth token, which every node of a fleet shares; without one (loopback
// only) the key is this process's own.
func telephonyEdge(cfg Config, log *slog.Logger) *server.Telephony {
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
		Signer: telephony.NewSigner(key, cfg.Clock.Now), PublicURL: cfg.PublicURL}
}
