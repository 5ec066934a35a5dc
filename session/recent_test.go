package session

import (
	"slices"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/store"
)

func recentIDs(r *recentSessions) []string {
	var ids []string
	for _, rc := range r.current() {
		ids = append(ids, rc.rec.ID)
	}
	return ids
}

// The recent copies stay within their byte bound (oldest out first), leave
// after the idle timeout, and go when a newer owner takes their session.
func TestRecentSessionCopiesAreBoundedByBytesAgeAndOwner(t *testing.T) {
	now := time.Unix(1000, 0)
	r := newRecentSessions(100, time.Minute, func() time.Time { return now })
	keep := func(id string, epoch int64, bytes int) {
		r.keep(store.Record{ID: id, Epoch: epoch}, nil, []int{bytes}, nil, store.Block{})
	}
	keep("a", 1, 40)
	keep("b", 1, 40)
	keep("c", 1, 40) // 120 > 100: a goes
	if got := recentIDs(r); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("after going over the bound: %v, want b c", got)
	}
	keep("big", 1, 101) // larger than the whole bound: not kept, nothing else goes
	keep("b", 2, 10)    // kept again: now the newest
	if got := recentIDs(r); !slices.Equal(got, []string{"c", "b"}) {
		t.Fatalf("after re-keeping b: %v, want c b", got)
	}
	r.forget("c", 1) // the same epoch: not newer, kept
	r.forget("b", 3) // a newer owner elsewhere
	if got := recentIDs(r); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("after a newer owner took b: %v, want c", got)
	}
	now = now.Add(time.Minute)
	if got := recentIDs(r); len(got) != 0 || r.bytes != 0 {
		t.Fatalf("after the idle timeout: %v (%d bytes), want none", got, r.bytes)
	}
}
