package store

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/turnstile-gw/turnstile/metrics"
)

// CountLimits counts one event against every limit of lims with a Max in
// one round trip: a pipeline of the sliding-window script, one call per
// window, each on its own hash tag (no call spans two). Limits without a
// Max are skipped.
func (s *RedisStore) CountLimits(ctx context.Context, member string, lims ...TurnLimit) (bool, time.Duration, error) {
	calls := make([]scriptCall, 0, len(lims))
	for _, lim := range lims {
		if lim.Max > 0 {
			calls = append(calls, scriptCall{turnsScript, []string{turnsKey(lim)}, s.turnArgs(lim, member)})
		}
	}
	if len(calls) == 0 {
		return true, 0, nil
	}
	allowed, wait := true, time.Duration(0)
	err := s.call(ctx, metrics.RedisTurns, func(ctx context.Context) error {
		cmds := make([]*redis.Cmd, len(calls))
		_, _ = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, c := range calls {
				cmds[i] = c.queue(ctx, p)
			}
			return nil
		})
		for i, c := range calls {
			ok, w, err := turnReply(c.settle(ctx, s.c, cmds[i]))
			if err != nil {
				return fmt.Errorf("limit %s: %w", c.keys[0], err)
			}
			if !ok {
				allowed, wait = false, max(wait, w)
			}
		}
		return nil
	})
	if err != nil {
		return true, 0, err
	}
	return allowed, wait, nil
}

// UncountLimits takes back an event that CountLimits counted under member
// from every window of lims (one round trip): an attempt that failed for a
// reason of the gateway's, such as a store that cannot serve it yet, is
// not held against the client that is told to retry.
func (s *RedisStore) UncountLimits(ctx context.Context, member string, lims ...TurnLimit) error {
	return s.call(ctx, metrics.RedisTurns, func(ctx context.Context) error {
		_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, lim := range lims {
				if lim.Max > 0 {
					p.ZRem(ctx, turnsKey(lim), member)
				}
			}
			return nil
		})
		return err
	})
}
