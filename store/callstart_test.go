package store

import (
	"context"
	"testing"
	"time"
)

func TestACallStartIsUsedOnceWithinItsWindow(t *testing.T) {
	for name, start := range map[string]func(*testing.T) *backend{
		"miniredis": startMiniredis, "redis-server": startRedisServer,
	} {
		t.Run(name, func(t *testing.T) {
			b := start(t)
			ctx := context.Background()
			s := b.store(RedisStoreOptions{})
			use := func(sid, sig string, want bool) {
				t.Helper()
				first, err := s.UseCallStart(ctx, sid, sig, 6*time.Minute)
				if err != nil || first != want {
					t.Fatalf("UseCallStart(%s, %s) = %v, %v; want %v", sid, sig, first, err, want)
				}
			}
			use("CA1", "sig-a", true)
			use("CA1", "sig-a", false) // the replay
			use("CA1", "sig-b", true)  // another answer for the call
			use("CA2", "sig-a", true)  // another call
			// Remembered as long as the start is valid, not for ever.
			ttl, err := b.client.PTTL(ctx, callStartKey("CA1", "sig-a")).Result()
			if err != nil || ttl <= 5*time.Minute || ttl > 6*time.Minute {
				t.Fatalf("the record lives %v (%v), want just under 6m", ttl, err)
			}
		})
	}
}
