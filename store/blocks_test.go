package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Blocks of one user set at once, from several nodes, keep the longest: a
// block never shortens a longer one, however the writes interleave.
func TestConcurrentBlocksKeepTheLongest(t *testing.T) {
	for name, start := range map[string]func(*testing.T) *backend{
		"miniredis": startMiniredis, "redis-server": startRedisServer,
	} {
		t.Run(name, func(t *testing.T) {
			b := start(t)
			ctx := context.Background()
			nodes := []*RedisStore{b.store(RedisStoreOptions{}), b.store(RedisStoreOptions{})}
			base := time.Now().Add(time.Hour).Truncate(time.Second)
			const rounds, writers = 40, 8
			for r := range rounds {
				user := fmt.Sprintf("user-%d", r)
				var wg sync.WaitGroup
				errs := make(chan error, writers)
				for w := range writers {
					// Round r's longest block comes from a different writer each round.
					until := base.Add(time.Duration((w+r)%writers) * time.Minute)
					wg.Go(func() {
						errs <- nodes[w%len(nodes)].BlockUser(ctx, user, Block{Until: until, Reason: fmt.Sprint(w)})
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						t.Fatal(err)
					}
				}
				got, err := nodes[0].BlockOf(ctx, user)
				if err != nil {
					t.Fatal(err)
				}
				if want := base.Add((writers - 1) * time.Minute); !got.Until.Equal(want) {
					t.Fatalf("round %d: block until %v, want the longest, %v", r, got.Until, want)
				}
			}
		})
	}
}

// A longer block stored before blocks kept their end in milliseconds (the
// key's expiry is its end) is not shortened either; a longer new one
// replaces it.
func TestBlockWrittenByAnEarlierVersionIsNotShortened(t *testing.T) {
	b := startMiniredis(t)
	s := b.store(RedisStoreOptions{})
	ctx := context.Background()
	long := time.Now().Add(2 * time.Hour).Truncate(time.Second)
	raw, _ := json.Marshal(Block{Until: long, Reason: "old"})
	if err := b.client.Set(ctx, blockKey("alice"), raw, time.Until(long)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.BlockUser(ctx, "alice", Block{Until: long.Add(-time.Hour), Reason: "shorter"}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.BlockOf(ctx, "alice"); err != nil || got.Reason != "old" || !got.Until.Equal(long) {
		t.Fatalf("block = %+v, %v; want the longer one kept", got, err)
	}
	longer := long.Add(time.Hour)
	if err := s.BlockUser(ctx, "alice", Block{Until: longer, Reason: "longer"}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.BlockOf(ctx, "alice"); err != nil || got.Reason != "longer" || !got.Until.Equal(longer) {
		t.Fatalf("block = %+v, %v; want the longer new one", got, err)
	}
}
