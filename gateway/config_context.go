package gateway

// Settings of what a session tells its model beyond the system prompt:
// facts about the user from the token, and the Live voice
// (docs/profiles.md).

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/turnstile-gw/turnstile/profiles"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/transport/geminilive"
)

func sessionContextSettings() []configSetting {
	return []configSetting{
		{env: "TURNSTILE_CONTEXT_CLAIMS", defDoc: "unset: no claims told",
			usage: "comma-separated token claims the model is told as facts about the user, e.g. tenant,plan " +
				"(strings, numbers and booleans; a value with a line break or over 256 bytes is dropped with a log line)",
			apply: func(c *Config, v string) error {
				// The same names and values as TURNSTILE_TOOL_CLAIMS.
				names, err := parseToolClaims(v)
				c.ContextClaims = names
				return err
			}},
		{env: "TURNSTILE_LIVE_VOICES", defDoc: "Gemini's thirty prebuilt voices (docs/profiles.md)",
			usage: "comma-separated voices a session.start or a profile may ask for; none: sessions may not pick a voice",
			apply: func(c *Config, v string) error {
				voices, err := parseVoices(v)
				c.LiveVoices = voices
				return err
			}},
		// After TURNSTILE_LIVE_VOICES, which it is checked against.
		{env: "TURNSTILE_LIVE_VOICE", defDoc: "unset: the model's own voice",
			usage: "the prebuilt voice Live speaks with when neither the profile nor session.start picks one (e.g. Kore), one of TURNSTILE_LIVE_VOICES",
			apply: func(c *Config, v string) error {
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
	return configSetting{env: "TURNSTILE_PROFILES_DIR", defDoc: "unset: every session runs the default",
		usage: "folder of assistant profiles, one <name>.json each (systemPrompt, tools, voice, languageCode, budgets, greeting); the token's profile claim picks one (docs/profiles.md)",
		apply: func(c *Config, v string) error {
			if v == "" {
				return nil
			}
			if fi, err := os.Stat(v); err != nil || !fi.IsDir() {
				return errors.New("not a readable folder")
			}
			c.ProfilesDir = v
			return nil
		}}
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
