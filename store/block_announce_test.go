package store

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// A block set (by the model's script or by an operator) is announced with
// its end and reason, so that no node reads it back; a lift, and the
// announcement of a node of an earlier version ("block <user>"), are
// heard without one, for the hearer to read.
func TestABlockIsAnnouncedWithItsEnd(t *testing.T) {
	for name, start := range map[string]func(*testing.T) *backend{
		"miniredis": startMiniredis, "redis-server": startRedisServer,
	} {
		t.Run(name, func(t *testing.T) {
			b := start(t)
			s := b.store(RedisStoreOptions{WatchInterval: 50 * time.Millisecond})
			w := startWatch(t, s)
			ctx := context.Background()

			user := "u-blocked-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			heard := func(want string) {
				t.Helper()
				testwait.For(t, want, func() bool { owners, _ := w.state(); return slices.Contains(owners, want) })
			}
			until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
			if err := s.BlockUser(ctx, user, Block{Until: until, Reason: "abuse"}); err != nil {
				t.Fatal(err)
			}
			heard("block:" + user + " until " + until.Format(time.RFC3339) + " abuse")
			shorter := until.Add(-30 * time.Minute)
			if err := s.SetBlock(ctx, user, Block{Until: shorter, Reason: "operator"}); err != nil {
				t.Fatal(err)
			}
			heard("block:" + user + " until " + shorter.Format(time.RFC3339) + " operator")
			if _, err := s.LiftBlock(ctx, user); err != nil {
				t.Fatal(err)
			}
			heard("block:" + user + " (to read)")
			// A node of the previous version announces the user alone.
			old := user + "-old"
			if err := b.client.Publish(ctx, ownersChannel, "block "+old).Err(); err != nil {
				t.Fatal(err)
			}
			heard("block:" + old + " (to read)")
		})
	}
}
