package store

import (
	"context"
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
	b.mr.FastForward(memory + time.Second)
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
