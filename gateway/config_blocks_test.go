package gateway

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestBlockEscalationSettingsDefaultParseAndNameTheirErrors(t *testing.T) {
	cfg, err := loadTestConfig(t, nil, map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{10 * time.Minute, time.Hour, 24 * time.Hour}; !slices.Equal(cfg.BlockSteps, want) ||
		cfg.BlockMemory != 7*24*time.Hour {
		t.Fatalf("defaults: steps %v, memory %v; want %v, 168h", cfg.BlockSteps, cfg.BlockMemory, want)
	}
	cfg, err = loadTestConfig(t, []string{"-block-steps", "2m, 30m"}, map[string]string{"TURNSTILE_BLOCK_MEMORY": "24h"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.BlockSteps, []time.Duration{2 * time.Minute, 30 * time.Minute}) || cfg.BlockMemory != 24*time.Hour {
		t.Fatalf("set: steps %v, memory %v", cfg.BlockSteps, cfg.BlockMemory)
	}
	for _, c := range []struct{ env, value, want string }{
		{"TURNSTILE_BLOCK_STEPS", "10m,soon", "TURNSTILE_BLOCK_STEPS=10m,soon: step 2 is not a duration"},
		{"TURNSTILE_BLOCK_STEPS", "30s", "TURNSTILE_BLOCK_STEPS=30s: step 1 must be between 1m and 24h"},
		{"TURNSTILE_BLOCK_STEPS", "1h,48h", "TURNSTILE_BLOCK_STEPS=1h,48h: step 2 must be between 1m and 24h"},
		{"TURNSTILE_BLOCK_STEPS", "1h,10m", "TURNSTILE_BLOCK_STEPS=1h,10m: step 2 is shorter than the one before"},
		{"TURNSTILE_BLOCK_MEMORY", "10s", "TURNSTILE_BLOCK_MEMORY=10s: must be at least 1m"},
	} {
		_, err := loadTestConfig(t, nil, map[string]string{c.env: c.value})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s=%q: error %v, want it to contain %q", c.env, c.value, err, c.want)
		}
	}
}

// withBlockDefaults sets the block escalation defaults on a Config.
func withBlockDefaults(c *Config) {
	c.BlockSteps = []time.Duration{10 * time.Minute, time.Hour, 24 * time.Hour}
	c.BlockMemory = 7 * 24 * time.Hour
}
