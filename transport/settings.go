package transport

// The models' own settings: which Gemini (the API with a key, another
// endpoint, or Vertex AI), who answers text turns, the model names and the
// tool choice. Each is a row of a table the gateway lifts into its own;
// the adapters (geminitext, geminilive, openaitext) are built from them.

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/turnstile-gw/turnstile/internal/settings"
)

// OpenAIDefaultBaseURL is OpenAI's own endpoint, where an unset
// OPENAI_BASE_URL points.
const OpenAIDefaultBaseURL = "https://api.openai.com/v1"

// Models are who answers and with which model.
type Models struct {
	GeminiAPIKey  settings.Secret    // "" = the offline demo model (unless UseVertexAI)
	GeminiBaseURL settings.SecretURL // "" = Google's endpoint
	// UseVertexAI: Gemini (text and Live) through Vertex AI with
	// application default credentials, in VertexProject and
	// VertexLocation.
	UseVertexAI    bool
	VertexProject  string
	VertexLocation string

	TextProvider  Provider           // who answers text turns: gemini or openai
	TextModel     string             // Gemini's model for text turns
	LiveModel     string             // the model of voice (Gemini Live) sessions
	OpenAIAPIKey  settings.Secret    // "" = no key sent (local servers)
	OpenAIBaseURL settings.SecretURL // "" = OpenAIDefaultBaseURL
	OpenAIModel   string             // the model of text turns with the openai provider
	// ToolChoice is whether text models may, must or must not call tools:
	// ToolChoiceAuto, ToolChoiceRequired or ToolChoiceNone.
	ToolChoice string
	// toolChoiceAlias is TURNSTILE_OPENAI_TOOL_CHOICE, the older name of
	// ToolChoice, until ToolChoiceChecks reads it; "" = unset.
	toolChoiceAlias string
}

// Offline reports whether text turns are answered by the in-process offline demo model: the text provider
// has no credentials (Gemini: no GEMINI_API_KEY; OpenAI: neither OPENAI_API_KEY nor OPENAI_BASE_URL).
func (m Models) Offline() bool {
	if m.TextProvider == ProviderOpenAI {
		return m.OpenAIOffline()
	}
	return m.GeminiOffline()
}

// GeminiOffline reports whether Gemini (voice always, text with the gemini provider) is the in-process fake
// Gemini server, because no GEMINI_API_KEY is set and Vertex AI is not used.
func (m Models) GeminiOffline() bool { return m.GeminiAPIKey == "" && !m.UseVertexAI }

// OpenAIOffline reports whether the openai text provider would be the in-process fake OpenAI server: no key
// and no base URL (a local server at OPENAI_BASE_URL needs no key).
func (m Models) OpenAIOffline() bool { return m.OpenAIAPIKey == "" && m.OpenAIBaseURL == "" }

// GeminiSettings are the rows of where Gemini is: its key and endpoint, or
// Vertex AI's project and region.
func GeminiSettings() []settings.Setting[Models] {
	return []settings.Setting[Models]{
		{Env: "GEMINI_API_KEY", DefDoc: "unset: offline demo model", Secret: true,
			Usage: "key for the Gemini API (prefer the environment: flags show in ps)",
			Apply: settings.Key(func(m *Models) *settings.Secret { return &m.GeminiAPIKey })},
		{Env: "GEMINI_BASE_URL", DefDoc: "unset: Google's endpoint",
			Usage: "base URL of a Gemini-compatible endpoint (http, https, ws or wss)",
			Apply: baseURL(func(m *Models) *settings.SecretURL { return &m.GeminiBaseURL }, "", "http", "https", "ws", "wss")},
		{Env: "GOOGLE_GENAI_USE_VERTEXAI", Def: "false",
			Usage: "true: Gemini (text and Live) through Vertex AI, with GOOGLE_CLOUD_PROJECT, GOOGLE_CLOUD_LOCATION and application default credentials, instead of the Gemini API and GEMINI_API_KEY",
			Apply: settings.Bool(func(m *Models) *bool { return &m.UseVertexAI })},
		{Env: "GOOGLE_CLOUD_PROJECT", DefDoc: "unset; required with GOOGLE_GENAI_USE_VERTEXAI=true",
			Usage: "Google Cloud project id for Vertex AI", Apply: vertexName(func(m *Models) *string { return &m.VertexProject })},
		{Env: "GOOGLE_CLOUD_LOCATION", DefDoc: "unset; required with GOOGLE_GENAI_USE_VERTEXAI=true",
			Usage: "Vertex AI region, e.g. us-central1 or europe-west4 (one that serves both models, the Live one included)",
			Apply: vertexName(func(m *Models) *string { return &m.VertexLocation })},
	}
}

// ModelSettings are the rows of who answers text turns, the model names
// and the tool choice.
func ModelSettings() []settings.Setting[Models] {
	return []settings.Setting[Models]{
		{Env: "TURNSTILE_TEXT_MODEL", Def: "gemini-2.5-flash", Usage: "Gemini model for text turns (with TURNSTILE_TEXT_PROVIDER=gemini)",
			Apply: modelName(func(m *Models) *string { return &m.TextModel })},
		{Env: "TURNSTILE_TEXT_PROVIDER", Def: string(ProviderGemini),
			Usage: "who answers text turns: gemini, or openai for any OpenAI-compatible Chat Completions server (voice always uses Gemini Live)",
			Apply: func(m *Models, v string) error {
				switch p := Provider(strings.ToLower(strings.TrimSpace(v))); p {
				case ProviderGemini, ProviderOpenAI:
					m.TextProvider = p
					return nil
				}
				return errors.New("must be gemini or openai")
			}},
		{Env: "OPENAI_API_KEY", DefDoc: "unset: no key sent; with TURNSTILE_TEXT_PROVIDER=openai and no OPENAI_BASE_URL either, the offline demo model",
			Secret: true, Usage: "key for the OpenAI-compatible server, sent as a bearer token (prefer the environment: flags show in ps)",
			Apply: settings.Key(func(m *Models) *settings.Secret { return &m.OpenAIAPIKey })},
		{Env: "OPENAI_BASE_URL", DefDoc: "unset: OpenAI's endpoint, " + OpenAIDefaultBaseURL,
			Usage: "base URL of an OpenAI-compatible server, its version path included, e.g. http://localhost:11434/v1 (Ollama); no key needed with it",
			Apply: baseURL(func(m *Models) *settings.SecretURL { return &m.OpenAIBaseURL }, "http://localhost:11434/v1", "http", "https")},
		{Env: "TURNSTILE_OPENAI_MODEL", Def: "gpt-4o-mini", Usage: "model for text turns with TURNSTILE_TEXT_PROVIDER=openai, e.g. llama3.1 on Ollama",
			Apply: modelName(func(m *Models) *string { return &m.OpenAIModel })},
		{Env: "TURNSTILE_TOOL_CHOICE", Def: ToolChoiceAuto,
			Usage: "whether the text model may call tools (auto), must call one (required) or may not (none); sent with every text request " +
				"that declares tools, as Gemini's functionCallingConfig.mode (AUTO, ANY, NONE) or OpenAI's tool_choice",
			Apply: func(m *Models, v string) error {
				tc, err := parseToolChoice(v)
				m.ToolChoice = tc
				return err
			}},
		{Env: toolChoiceAliasEnv, DefDoc: "unset: TURNSTILE_TOOL_CHOICE",
			Usage: "the older name of TURNSTILE_TOOL_CHOICE, still read when that is not set",
			Apply: func(m *Models, v string) error {
				if v == "" {
					return nil
				}
				tc, err := parseToolChoice(v)
				m.toolChoiceAlias = tc
				return err
			}},
		{Env: "TURNSTILE_LIVE_MODEL", Def: "gemini-2.5-flash-native-audio-preview-12-2025",
			Usage: "model for voice sessions (Gemini Live)", Apply: modelName(func(m *Models) *string { return &m.LiveModel })},
	}
}

const toolChoiceEnv, toolChoiceAliasEnv = "TURNSTILE_TOOL_CHOICE", "TURNSTILE_OPENAI_TOOL_CHOICE"

// ToolChoiceChecks applies TURNSTILE_OPENAI_TOOL_CHOICE, the older name of
// TURNSTILE_TOOL_CHOICE, when only it is set; both set to different values
// is an error naming both. failed and explicit say which settings failed
// and which were given (not defaulted); shown is how each is named.
func (m *Models) ToolChoiceChecks(failed, explicit map[string]bool, shown map[string]string) []error {
	given := m.toolChoiceAlias
	m.toolChoiceAlias = "" // read once, here
	if failed[toolChoiceEnv] || failed[toolChoiceAliasEnv] || given == "" {
		return nil
	}
	if explicit[toolChoiceEnv] && m.ToolChoice != given {
		return []error{fmt.Errorf("%s: conflicts with %s (its older name); set only %s",
			shown[toolChoiceAliasEnv], shown[toolChoiceEnv], toolChoiceEnv)}
	}
	m.ToolChoice = given
	return nil
}

// parseToolChoice reads a tool choice in any case.
func parseToolChoice(v string) (string, error) {
	tc := strings.ToLower(strings.TrimSpace(v))
	if !ValidToolChoice(tc) {
		return "", errors.New("must be auto, required or none")
	}
	return tc, nil
}

func modelName(field func(*Models) *string) func(*Models, string) error {
	return func(m *Models, v string) error {
		if strings.ContainsFunc(v, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
			return errors.New("a model name has no spaces or control characters")
		}
		*field(m) = v
		return nil
	}
}

// baseURL accepts an absolute URL of one of schemes; a URL of another
// scheme is refused with the example, if any.
func baseURL(field func(*Models) *settings.SecretURL, example string, schemes ...string) func(*Models, string) error {
	return func(m *Models, v string) error {
		if v == "" {
			return nil
		}
		if _, err := settings.AbsoluteURL(v, schemes...); errors.Is(err, settings.ErrURLScheme) && example != "" {
			return fmt.Errorf("%w, e.g. %s", err, example)
		} else if err != nil {
			return err
		}
		*field(m) = settings.SecretURL(v)
		return nil
	}
}

// vertexName accepts a project id or a location: they go into URL paths
// and resource names, so they have no slashes, spaces or control
// characters.
func vertexName(field func(*Models) *string) func(*Models, string) error {
	return func(m *Models, v string) error {
		if strings.ContainsFunc(v, func(r rune) bool {
			return r == '/' || r == '?' || r == '#' || unicode.IsSpace(r) || unicode.IsControl(r)
		}) {
			return errors.New("has a slash, ?, #, space or control character")
		}
		*field(m) = v
		return nil
	}
}
