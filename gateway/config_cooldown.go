package gateway

import (
	"fmt"
	"time"

	"github.com/turnstile-gw/turnstile/internal/settings"
	"github.com/turnstile-gw/turnstile/store"
)

// abuseCooldownSettings are how long a user closed 4008 for rate abuse is
// kept out (docs/operations.md, "Abuse cooldown").
func abuseCooldownSettings() []configSetting {
	return []configSetting{
		settings.Duration("TURNSTILE_ABUSE_COOLDOWN", "1m", "after a connection is closed 4008 for rate abuse, its user's new connections and resumes are refused (HTTP 429, Retry-After) on every node this long; doubled for each repeat; 0s: no cooldown (not applied in dev mode)", 0,
			func(c *Config) *time.Duration { return &c.AbuseCooldown }),
		settings.Duration("TURNSTILE_ABUSE_COOLDOWN_MAX", "1h", "the longest abuse cooldown, however many repeats (at least TURNSTILE_ABUSE_COOLDOWN)", time.Second,
			func(c *Config) *time.Duration { return &c.AbuseCooldownMax }),
		settings.Duration("TURNSTILE_ABUSE_COOLDOWN_MEMORY", "24h", "how long after an abuse cooldown ends another rate abuse of the user still counts as a repeat (and doubles the cooldown)", time.Second,
			func(c *Config) *time.Duration { return &c.AbuseCooldownMemory }),
	}
}

// cooldownChecks refuses a cooldown longer than its maximum.
func cooldownChecks(c Config, failed map[string]bool, shown map[string]string) []error {
	if failed["TURNSTILE_ABUSE_COOLDOWN"] || failed["TURNSTILE_ABUSE_COOLDOWN_MAX"] {
		return nil
	}
	if c.AbuseCooldown > c.AbuseCooldownMax {
		return []error{fmt.Errorf("%s: must not exceed %s", shown["TURNSTILE_ABUSE_COOLDOWN"], shown["TURNSTILE_ABUSE_COOLDOWN_MAX"])}
	}
	return nil
}

// abuseCooldown is the session's cooldown policy (a zero First: none).
func (c Config) abuseCooldown() store.CooldownPolicy {
	return store.CooldownPolicy{First: c.AbuseCooldown, Max: c.AbuseCooldownMax, Memory: c.AbuseCooldownMemory}
}
