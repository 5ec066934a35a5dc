package store

import (
	"context"
	"sync"
	"testing"
	"time"
)

// A user's model-imposed blocks are counted across nodes (escalation,
// session/block.go), forgotten after the memory, and forgiven by an
// operator's lift.
func TestStrikesCountExpireAndAreForgivenByALift(t *testing.T) {
	b := startMiniredis(t)
	s := b.store(RedisStoreOptions{})
	other := b.store(RedisStoreOptions{}) // another node on the same Redis
	ctx := context.Background()
	const memory = time.Hour

	for i, st := range []*RedisStore{s, other, s} {
		n, err := st.Strike(ctx, "alice", memory)
		if err != nil || n != i+1 {
			t.Fatalf("strike %d = %d, %v; want %d", i+1, n, err, i+1)
		}
	}
	if n, err := s.Strike(ctx, "bob", memory); err != nil || n != 1 {
		t.Fatalf("bob's first strike = %d, %v; want 1", n, err)
	}

	// A memory without a new strike forgets them.
	b.mr.mr.FastForward(memory + time.Second)
	if n, err := s.Strike(ctx, "alice", memory); err != nil || n != 1 {
		t.Fatalf("strike after the memory = %d, %v; want 1 again", n, err)
	}

	// An operator's lift forgives them.
	if _, err := s.Strike(ctx, "alice", memory); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LiftBlock(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Strike(ctx, "alice", memory); err != nil || n != 1 {
		t.Fatalf("strike after a lift = %d, %v; want 1", n, err)
	}
}

// Strikes at once from several nodes are each counted: none is lost.
func TestConcurrentStrikesAreEachCounted(t *testing.T) {
	for name, start := range map[string]func(*testing.T) *backend{
		"miniredis": startMiniredis, "redis-server": startRedisServer,
	} {
		t.Run(name, func(t *testing.T) {
			b := start(t)
			ctx := context.Background()
			nodes := []*RedisStore{b.store(RedisStoreOptions{}), b.store(RedisStoreOptions{})}
			const strikes = 16
			var wg sync.WaitGroup
			seen := make(chan int, strikes)
			for i := range strikes {
				wg.Go(func() {
					n, err := nodes[i%len(nodes)].Strike(ctx, "alice", time.Hour)
					if err != nil {
						t.Error(err)
					}
					seen <- n
				})
			}
			wg.Wait()
			close(seen)
			got := map[int]bool{}
			for n := range seen {
				got[n] = true
			}
			for n := 1; n <= strikes; n++ {
				if !got[n] {
					t.Fatalf("strike counts %v: %d is missing (a strike was lost)", got, n)
				}
			}
		})
	}
}

// A strike count kept by an earlier version (a bare counter) goes on
// counting.
func TestStrikesKeptByAnEarlierVersionGoOnCounting(t *testing.T) {
	b := startMiniredis(t)
	s := b.store(RedisStoreOptions{})
	ctx := context.Background()
	if err := b.client.Set(ctx, strikesKey("alice"), 2, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Strike(ctx, "alice", time.Hour); err != nil || n != 3 {
		t.Fatalf("strike after two kept by an earlier version = %d, %v; want 3", n, err)
	}
}
