package gateway

import (
	"github.com/turnstile-gw/turnstile/internal/pseudonym"
	"github.com/turnstile-gw/turnstile/tracing"
	"github.com/turnstile-gw/turnstile/transport"
)

// loadTracing reads the OpenTelemetry variables that decide whether and how
// the gateway traces (the SDK's own, nothing renamed; docs/configuration.md
// lists them apart); a value it cannot honour is an error naming it. The
// tracing package's one row of the gateway's table, TURNSTILE_PSEUDONYM_KEY,
// is read with the others (tracing/settings.go).
func loadTracing(c *Config, getenv func(string) string) []error {
	if err := c.Tracing.ReadEnv(getenv); err != nil {
		return []error{err}
	}
	return nil
}

// pseudonyms is the key of user pseudonyms: the setting's, else one derived
// from the auth secret (stable across nodes), else a random one.
func (c Config) pseudonyms() (key pseudonym.Key, stable bool) {
	switch {
	case c.Tracing.PseudonymKey != "":
		return pseudonym.New([]byte(c.Tracing.PseudonymKey)), true
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
