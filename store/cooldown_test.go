package store

import (
	"context"
	"testing"
	"time"
)

func TestAbuseCooldownsEscalateAndAreForgotten(t *testing.T) {
	for name, start := range map[string]func(*testing.T) *backend{
		"miniredis": startMiniredis, "redis-server": startRedisServer,
	} {
		t.Run(name, func(t *testing.T) {
			b := start(t)
			ctx := context.Background()
			clock := &leaseClock{}
			s := b.store(RedisStoreOptions{Now: clock.now})
			p := CooldownPolicy{First: time.Minute, Max: 3 * time.Minute, Memory: time.Hour}
			until := func(user string) time.Duration {
				t.Helper()
				left, err := s.CooldownLeft(ctx, user)
				if err != nil {
					t.Fatal(err)
				}
				return left.Round(time.Second)
			}
			abuse := func(want time.Duration, strikes int) {
				t.Helper()
				cd, err := s.StartCooldown(ctx, "mallory", p)
				if err != nil {
					t.Fatal(err)
				}
				if got := cd.Left.Round(time.Second); got != want || cd.Strikes != strikes {
					t.Fatalf("cooldown %v (strike %d), want %v (strike %d)", got, cd.Strikes, want, strikes)
				}
			}
			if got := until("mallory"); got != 0 {
				t.Fatalf("before any abuse: cooling down for %v", got)
			}
			abuse(time.Minute, 1)
			if got := until("mallory"); got != time.Minute {
				t.Fatalf("after the first abuse: %v, want 1m", got)
			}
			if got := until("bob"); got != 0 {
				t.Fatalf("another user cools down for %v", got)
			}
			// Another connection of the user closed during the cooldown is
			// the same strike.
			clock.advance(10 * time.Second)
			abuse(50*time.Second, 1)

			// Repeats after the cooldown double it, up to Max.
			clock.advance(time.Minute)
			if got := until("mallory"); got != 0 {
				t.Fatalf("after the cooldown: still %v", got)
			}
			abuse(2*time.Minute, 2)
			clock.advance(3 * time.Minute)
			abuse(3*time.Minute, 3)
			clock.advance(4 * time.Minute)
			abuse(3*time.Minute, 4)

			// An abuse more than Memory after the last cooldown ended starts
			// over.
			clock.advance(3*time.Minute + p.Memory + time.Second)
			abuse(time.Minute, 1)

			// The record expires by itself (a TTL of the cooldown plus the memory).
			ttl := b.client.PTTL(ctx, cooldownKey("mallory")).Val()
			if ttl <= 0 || ttl > time.Minute+p.Memory {
				t.Fatalf("cooldown record TTL %v, want within %v", ttl, time.Minute+p.Memory)
			}
		})
	}
}
