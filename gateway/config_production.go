package gateway

// The setting and the checks that keep a gateway on a public address from
// serving the offline demo model by accident, and Vertex AI's checks (its
// settings are the transport's: transport/settings.go).

import (
	"errors"
	"fmt"
	"strings"

	"github.com/turnstile-gw/turnstile/internal/settings"
	"github.com/turnstile-gw/turnstile/server"
	"github.com/turnstile-gw/turnstile/transport"
)

func demoSetting() configSetting {
	return configSetting{Env: "TURNSTILE_DEMO", Def: "false",
		Usage: "true: serve the offline demo model on a non-loopback address on purpose (a public demo); without it such a gateway needs model credentials",
		Apply: settings.Bool(func(c *Config) *bool { return &c.Demo })}
}

// productionChecks refuses what would surprise an operator in production:
// Vertex AI without its project or location, Vertex AI and an API key at
// once, and the offline demo model on a non-loopback address without
// TURNSTILE_DEMO=true.
func productionChecks(c Config, failed map[string]bool, shown map[string]string) []error {
	var errs []error
	if c.UseVertexAI && !failed["GOOGLE_GENAI_USE_VERTEXAI"] {
		for _, s := range []struct{ env, v string }{{"GOOGLE_CLOUD_PROJECT", c.VertexProject}, {"GOOGLE_CLOUD_LOCATION", c.VertexLocation}} {
			if s.v == "" && !failed[s.env] {
				errs = append(errs, fmt.Errorf("%s: GOOGLE_GENAI_USE_VERTEXAI=true needs it (Vertex AI addresses models by project and region)", s.env))
			}
		}
		if c.GeminiAPIKey != "" && !failed["GEMINI_API_KEY"] {
			errs = append(errs, errors.New("GEMINI_API_KEY: set together with GOOGLE_GENAI_USE_VERTEXAI=true; Vertex AI uses application "+
				"default credentials, not a key: unset GEMINI_API_KEY, or GOOGLE_GENAI_USE_VERTEXAI for the Gemini API"))
		}
	}
	for _, env := range []string{"TURNSTILE_ADDR", "TURNSTILE_DEMO", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI",
		"TURNSTILE_TEXT_PROVIDER", "OPENAI_API_KEY", "OPENAI_BASE_URL"} {
		if failed[env] {
			return errs
		}
	}
	if c.Demo || server.IsLoopbackAddr(c.Addr) {
		return errs
	}
	var demo []string
	if c.TextProvider == transport.ProviderOpenAI && c.OpenAIOffline() {
		demo = append(demo, "text turns (TURNSTILE_TEXT_PROVIDER=openai without OPENAI_API_KEY or OPENAI_BASE_URL)")
	}
	if c.GeminiOffline() {
		what := "text and voice"
		if c.TextProvider == transport.ProviderOpenAI {
			what = "voice (Gemini Live)"
		}
		demo = append(demo, what+" (no GEMINI_API_KEY, no GOOGLE_GENAI_USE_VERTEXAI=true)")
	}
	if len(demo) > 0 {
		errs = append(errs, fmt.Errorf("%s: the address is not loopback and the offline demo model would answer %s; "+
			"set the model credentials (GEMINI_API_KEY, or GOOGLE_GENAI_USE_VERTEXAI=true with GOOGLE_CLOUD_PROJECT and "+
			"GOOGLE_CLOUD_LOCATION; with TURNSTILE_TEXT_PROVIDER=openai also OPENAI_API_KEY or OPENAI_BASE_URL), "+
			"or TURNSTILE_DEMO=true to serve the demo on purpose", shown["TURNSTILE_ADDR"], strings.Join(demo, " and ")))
	}
	return errs
}
