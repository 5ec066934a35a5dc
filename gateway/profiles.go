package gateway

// The assistant profiles of TURNSTILE_PROFILES_DIR (docs/profiles.md),
// loaded once the tools are known; the setting is the session's
// (session/settings_assistant.go).

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/turnstile-gw/turnstile/profiles"
	"github.com/turnstile-gw/turnstile/tools"
)

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
