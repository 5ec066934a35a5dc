package gateway

// Settings of the blocks the model imposes (ignore_user): they start short
// and escalate (session/block.go).

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/turnstile-gw/turnstile/internal/settings"
)

func blockSettings() []configSetting {
	return []configSetting{
		{Env: "TURNSTILE_BLOCK_STEPS", Def: "10m,1h,24h",
			Usage: "comma-separated caps of a user's 1st, 2nd, … block by the model (ignore_user) within TURNSTILE_BLOCK_MEMORY; the last applies to every later one; non-decreasing Go durations",
			Apply: func(c *Config, v string) error {
				steps, err := parseBlockSteps(v)
				if err != nil {
					return err
				}
				c.BlockSteps = steps
				return nil
			}},
		settings.Duration("TURNSTILE_BLOCK_MEMORY", "168h", "how long a user's blocks count toward the next one's step after the latest; an operator's unblock forgets them", time.Minute,
			func(c *Config) *time.Duration { return &c.BlockMemory }),
	}
}

// maxBlockStep is the longest block ignore_user can ask for (its
// duration_seconds maximum): a longer step would never apply.
const maxBlockStep = 24 * time.Hour

func parseBlockSteps(v string) ([]time.Duration, error) {
	if strings.TrimSpace(v) == "" {
		return nil, errors.New("must list at least one duration, e.g. 10m,1h,24h")
	}
	var steps []time.Duration
	for i, part := range strings.Split(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		switch {
		case err != nil:
			return nil, fmt.Errorf("step %d is not a duration (use a unit: 10m, 1h)", i+1)
		case d < time.Minute || d > maxBlockStep:
			return nil, fmt.Errorf("step %d must be between 1m and 24h", i+1)
		case len(steps) > 0 && d < steps[len(steps)-1]:
			return nil, fmt.Errorf("step %d is shorter than the one before: blocks escalate, never shrink", i+1)
		}
		steps = append(steps, d)
	}
	return steps, nil
}
