package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/turnstile-gw/turnstile/metrics"
)

// Abuse cooldowns: after a connection is closed for rate abuse (4008), its
// user may not connect, nor resume, on any node until the cooldown ends.
// Repeats escalate: each abuse within CooldownPolicy.Memory of the end of
// the last cooldown doubles it, up to CooldownPolicy.Max. The record is a
// hash under the user's hash tag (beside the user's leases and block), kept
// for the cooldown plus the memory: an escalating record (escalate.go).

func cooldownKey(user string) string { return "turnstile:user:{" + user + "}:cooldown" }

// CooldownPolicy is how long abuse cooldowns last.
type CooldownPolicy struct {
	First time.Duration // the first cooldown
	Max   time.Duration // the longest, however many repeats
	// Memory is how long after a cooldown ends a new abuse still counts
	// as a repeat (and escalates).
	Memory time.Duration
}

// Cooldown is a user's abuse cooldown.
type Cooldown struct {
	Until   time.Time     // when the user may connect again
	Left    time.Duration // how long that is from now (the store's clock)
	Strikes int           // abuses remembered, this one included (1: the first)
}

// StartCooldown records an abuse of user and returns the cooldown it
// earned: p.First, doubled for each repeat remembered, at most p.Max. An
// abuse while a cooldown runs returns that cooldown unchanged. One round
// trip (a Lua script).
func (s *RedisStore) StartCooldown(ctx context.Context, user string, p CooldownPolicy) (Cooldown, error) {
	if p.First <= 0 || p.Max < p.First || p.Memory < 0 {
		return Cooldown{}, fmt.Errorf("start cooldown: policy %+v: need 0 < First <= Max and Memory >= 0", p)
	}
	var cd Cooldown
	err := s.call(ctx, metrics.RedisCooldown, func(ctx context.Context) error {
		now := s.now()
		until, strikes, err := s.escalate(ctx, cooldownKey(user), now, escalation{first: p.First, longest: p.Max, memory: p.Memory})
		if err != nil {
			return fmt.Errorf("start cooldown: %w", err)
		}
		cd = Cooldown{Until: until, Left: until.Sub(now), Strikes: strikes}
		return nil
	})
	return cd, err
}

// CooldownLeft returns how long user's cooldown still runs; 0 when the
// user is not cooling down. One round trip.
func (s *RedisStore) CooldownLeft(ctx context.Context, user string) (time.Duration, error) {
	var left time.Duration
	err := s.call(ctx, metrics.RedisCooldown, func(ctx context.Context) error {
		raw, err := s.c.HGet(ctx, cooldownKey(user), "until").Result()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("cooldown: %w", err)
		}
		ms, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return fmt.Errorf("cooldown: until %q: %w", raw, err)
		}
		left = max(time.UnixMilli(ms).Sub(s.now()), 0)
		return nil
	})
	return left, err
}
