package gateway

import (
	"fmt"

	"github.com/turnstile-gw/turnstile/internal/pseudonym"
	"github.com/turnstile-gw/turnstile/tracing"
	"github.com/turnstile-gw/turnstile/transport"
)

// tracingSettings are the gateway's own tracing settings. Tracing itself is
// configured by the OpenTelemetry SDK's OTEL_* variables, nothing renamed
// (loadTracing; docs/configuration.md lists them apart).
func tracingSettings() []configSetting {
	return []configSetting{
		{Env: "TURNSTILE_PSEUDONYM_KEY", Secret: true,
			DefDoc: "unset: derived from TURNSTILE_AUTH_SECRET; without one, random at each start",
			Usage: "HMAC key of the user pseudonyms in traces (u_ and 32 hex digits), at least 32 bytes; the same on every node " +
				"for stable pseudonyms",
			Apply: func(c *Config, v string) error {
				if v != "" && len(v) < pseudonym.MinKeyBytes {
					return fmt.Errorf("must be at least %d bytes", pseudonym.MinKeyBytes)
				}
				c.PseudonymKey = Secret(v)
				return nil
			}},
	}
}

// loadTracing reads the OpenTelemetry variables that decide whether and how
// the gateway traces; a value it cannot honour is an error naming it.
func loadTracing(c *Config, getenv func(string) string) []error {
	s, err := tracing.SettingsFromEnv(getenv)
	if err != nil {
		return []error{err}
	}
	c.Tracing = s
	return nil
}

// pseudonyms is the key of user pseudonyms: the setting's, else one derived
// from the auth secret (stable across nodes), else a random one.
func (c Config) pseudonyms() (key pseudonym.Key, stable bool) {
	switch {
	case c.PseudonymKey != "":
		return pseudonym.New([]byte(c.PseudonymKey)), true
	case c.AuthSecret != "":
		return pseudonym.Derive([]byte(c.AuthSecret)), true
	}
	return pseudonym.Random(), false
}

// genAIProvider is the text model's gen_ai.provider.name.
func (c Config) genAIProvider() string {
	switch {
	case c.TextProvider == transport.ProviderOpenAI:
		return tracing.ProviderOpenAI
	case c.UseVertexAI:
		return tracing.ProviderVertexAI
	}
	return tracing.ProviderGemini
}
