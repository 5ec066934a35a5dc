package gateway

// Settings of what a session tells its model beyond the system prompt:
// facts about the user from the token, and the Live voice
// (docs/profiles.md).

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/turnstile-gw/turnstile/internal/settings"
	"github.com/turnstile-gw/turnstile/profiles"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/transport/geminilive"
)

func sessionContextSettings() []configSetting {
	return []configSetting{
		{Env: "TURNSTILE_CONTEXT_CLAIMS", DefDoc: "unset: no claims told",
			Usage: "comma-separated token claims the model is told as facts about the user, e.g. tenant,plan " +
				"(strings, numbers and booleans; a value with a line break or over 256 bytes is dropped with a log line)",
			Apply: func(c *Config, v string) error {
				// The same names and values as TURNSTILE_TOOL_CLAIMS.
				names, err := tools.ParseClaimNames(v)
				c.ContextClaims = names
				return err
			}},
		{Env: "TURNSTILE_LIVE_VOICES", DefDoc: "Gemini's thirty prebuilt voices (docs/profiles.md)",
			Usage: "comma-separated voices a session.start or a profile may ask for; none: sessions may not pick a voice",
			Apply: func(c *Config, v string) error {
				voices, err := parseVoices(v)
				c.LiveVoices = voices
				return err
			}},
		// After TURNSTILE_LIVE_VOICES, which it is checked against.
		{Env: "TURNSTILE_LIVE_VOICE", DefDoc: "unset: the model's own voice",
			Usage: "the prebuilt voice Live speaks with when neither the profile nor session.start picks one (e.g. Kore), one of TURNSTILE_LIVE_VOICES",
			Apply: func(c *Config, v string) error {
				if v == "" {
					return nil
				}
				if !slices.Contains(c.LiveVoices, v) {
					return fmt.Errorf("%q is not one of TURNSTILE_LIVE_VOICES", v)
				}
				c.LiveVoice = v
				return nil
			}},
		profilesSetting(),
	}
}

// parseVoices reads TURNSTILE_LIVE_VOICES: voice names, none twice;
// unset is Gemini's own list, "none" is no voice at all.
func parseVoices(v string) ([]string, error) {
	switch strings.TrimSpace(v) {
	case "":
		return slices.Clone(geminilive.Voices), nil
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

// profilesSetting is TURNSTILE_PROFILES_DIR; the profiles are loaded by
// loadProfiles once the tools are known.
func profilesSetting() configSetting {
	return configSetting{Env: "TURNSTILE_PROFILES_DIR", DefDoc: "unset: every session runs the default",
		Usage: "folder of assistant profiles, one <name>.json each (systemPrompt, tools, voice, languageCode, budgets, greeting); the token's profile claim picks one (docs/profiles.md)",
		Apply: settings.OptionalFolder(func(c *Config) *string { return &c.ProfilesDir })}
}

// loadProfiles loads TURNSTILE_PROFILES_DIR, checking each profile's tools
// against the registry (an MCP tool, server__tool, may come up later) and
// its voice against TURNSTILE_LIVE_VOICES. nil when unset.
func loadProfiles(cfg Config, reg *tools.Registry, log *slog.Logger) (profiles.Set, error) {
	if cfg.ProfilesDir == "" {
		return nil, nil
	}
	set, err := profiles.Load(cfg.ProfilesDir, profiles.Check{Voices: cfg.LiveVoices, Tool: func(name string) bool {
		_, ok := reg.Lookup(name)
		return ok || strings.Contains(name, "__")
	}})
	if err != nil {
		return nil, fmt.Errorf("TURNSTILE_PROFILES_DIR: %w", err)
	}
	log.Info("assistant profiles loaded", "dir", cfg.ProfilesDir, "profiles", set.Names())
	return set, nil
}
