package session

// The assistant's settings: what a session tells its model (the system
// prompt, facts from the token), how it must answer (restricted output),
// the voices it may speak with and the profiles a token may pick
// (docs/profiles.md). Rows of the same table as the limits'.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/turnstile-gw/turnstile/internal/settings"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
)

// DefaultSystemPrompt is the base instruction when TURNSTILE_SYSTEM_PROMPT is not set.
const DefaultSystemPrompt = "You are a friendly customer-support assistant. " +
	"Before answering a question about the product, search the knowledge base with kb_search " +
	"and read the relevant article with kb_get; answer only from what you find, and say plainly " +
	"when the knowledge base does not cover the question instead of guessing. " +
	"Keep answers brief: two or three sentences, or a short list. " +
	"In a voice conversation speak naturally, without markdown, lists or links."

// Assistant is who a session's model is and what it is told.
type Assistant struct {
	SystemPrompt string
	// RestrictOutput makes the model answer through tools (finish or a
	// terminal tool): a text answer without a tool call is not the answer;
	// RestrictionMessage ("": textturn.DefaultRestrictionMessage)
	// follows it in that turn's history and the model is asked again, at
	// most RestrictionMaxInjections times per turn (0: no limit but the
	// iteration limit).
	RestrictOutput           bool
	RestrictionMessage       string
	RestrictionMaxInjections int
	// ContextClaims are the token claims the model is told as facts about
	// the user; the gateway hands them to the authenticator, which picks
	// them from each token.
	ContextClaims []string
	// LiveVoice is the Live voice of a session that asks for none ("" the
	// model's own); LiveVoices the voices a session.start or a profile may
	// ask for (empty: none).
	LiveVoice  string
	LiveVoices []string
	// ProfilesDir is the folder of assistant profiles ("": none); the
	// gateway loads it into Config.Profiles.
	ProfilesDir string
}

// SystemPromptSetting is the base instruction given to the model.
func SystemPromptSetting() settings.Setting[Assistant] {
	return settings.Setting[Assistant]{Env: "TURNSTILE_SYSTEM_PROMPT", Def: DefaultSystemPrompt, DefDoc: "a brief, knowledge-base-first support assistant",
		Usage: "base system instruction given to the model", Apply: func(a *Assistant, v string) error {
			a.SystemPrompt = v
			return nil
		}}
}

// RestrictionSettings are restricted output: the model must answer through
// tools.
func RestrictionSettings() []settings.Setting[Assistant] {
	return []settings.Setting[Assistant]{
		{Env: "TURNSTILE_RESTRICT_OUTPUT", Def: "false", Usage: "true: the model must answer through tools (finish or a terminal tool); a plain-text answer is refused and the restriction message injected",
			Apply: settings.Bool(func(a *Assistant) *bool { return &a.RestrictOutput })},
		{Env: "TURNSTILE_RESTRICTION_MESSAGE", DefDoc: "ask the model to use its tools and answer through finish",
			Usage: "the instruction injected when restricted output refuses a plain-text answer", Apply: func(a *Assistant, v string) error {
				a.RestrictionMessage = v
				return nil
			}},
		settings.Int("TURNSTILE_RESTRICTION_MAX_INJECTIONS", 0, "injections per turn under restricted output; 0: no limit but TURNSTILE_MAX_TOOL_ITERATIONS", 0, -1,
			func(a *Assistant) *int { return &a.RestrictionMaxInjections }),
	}
}

// ContextSettings are what a session tells its model beyond the system
// prompt — facts about the user from the token — and the voices and
// profiles it may run with. voices is the default of TURNSTILE_LIVE_VOICES
// (the model's prebuilt voices).
func ContextSettings(voices []string) []settings.Setting[Assistant] {
	return []settings.Setting[Assistant]{
		{Env: "TURNSTILE_CONTEXT_CLAIMS", DefDoc: "unset: no claims told",
			Usage: "comma-separated token claims the model is told as facts about the user, e.g. tenant,plan " +
				"(strings, numbers and booleans; a value with a line break or over 256 bytes is dropped with a log line)",
			Apply: func(a *Assistant, v string) error {
				// The same names and values as TURNSTILE_TOOL_CLAIMS.
				names, err := tools.ParseClaimNames(v)
				a.ContextClaims = names
				return err
			}},
		{Env: "TURNSTILE_LIVE_VOICES", DefDoc: "Gemini's thirty prebuilt voices (docs/profiles.md)",
			Usage: "comma-separated voices a session.start or a profile may ask for; none: sessions may not pick a voice",
			Apply: func(a *Assistant, v string) error {
				list, err := parseVoices(v, voices)
				a.LiveVoices = list
				return err
			}},
		// After TURNSTILE_LIVE_VOICES, which it is checked against.
		{Env: "TURNSTILE_LIVE_VOICE", DefDoc: "unset: the model's own voice",
			Usage: "the prebuilt voice Live speaks with when neither the profile nor session.start picks one (e.g. Kore), one of TURNSTILE_LIVE_VOICES",
			Apply: func(a *Assistant, v string) error {
				if v == "" {
					return nil
				}
				if !slices.Contains(a.LiveVoices, v) {
					return fmt.Errorf("%q is not one of TURNSTILE_LIVE_VOICES", v)
				}
				a.LiveVoice = v
				return nil
			}},
		{Env: "TURNSTILE_PROFILES_DIR", DefDoc: "unset: every session runs the default",
			Usage: "folder of assistant profiles, one <name>.json each (systemPrompt, tools, voice, languageCode, budgets, greeting); the token's profile claim picks one (docs/profiles.md)",
			Apply: settings.OptionalFolder(func(a *Assistant) *string { return &a.ProfilesDir })},
	}
}

// parseVoices reads TURNSTILE_LIVE_VOICES: voice names, none twice;
// unset is def, "none" is no voice at all.
func parseVoices(v string, def []string) ([]string, error) {
	switch strings.TrimSpace(v) {
	case "":
		return slices.Clone(def), nil
	case "none":
		return nil, nil
	}
	var out []string
	for part := range strings.SplitSeq(v, ",") {
		name := strings.TrimSpace(part)
		if !protocol.ValidVoiceName(name) {
			return nil, fmt.Errorf("voice %q: use letters, digits, - and _ (at most 64, starting with a letter)", name)
		}
		if slices.Contains(out, name) {
			return nil, fmt.Errorf("voice %q is listed twice", name)
		}
		out = append(out, name)
	}
	return out, nil
}
