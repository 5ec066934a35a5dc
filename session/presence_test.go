package session_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/session"
)

// A session starting on a node that holds others already writes itself
// into the live index, not every session again (at 20 000 sessions that
// was some 40 round trips per start); the periodic renewal still renews
// them all.
func TestASessionStartWritesOnlyItselfIntoTheLiveIndex(t *testing.T) {
	c := newCore(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { c.mgr.RunPresence(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	marked := func() map[string]bool {
		seen := map[string]bool{}
		for _, ids := range c.store.liveMarks() {
			for _, id := range ids {
				seen[id] = true
			}
		}
		return seen
	}
	var ids []string
	for range 5 {
		_, ready := c.start(nil)
		ids = append(ids, ready.SessionID)
	}
	testwait.For(t, "the five sessions to be in the live index", func() bool {
		seen := marked()
		for _, id := range ids {
			if !seen[id] {
				return false
			}
		}
		return true
	})

	before := len(c.store.liveMarks())
	_, ready := c.start(nil)
	testwait.For(t, "the sixth session to be in the live index", func() bool { return marked()[ready.SessionID] })
	// The presence loop's periodic renewal (every LiveTTL/3 of real time)
	// may write all six meanwhile; the start's own write is the sixth alone.
	writes, own := c.store.liveMarks()[before:], 0
	for _, w := range writes {
		switch {
		case slices.Equal(w, []string{ready.SessionID}):
			own++
		case len(w) != len(ids)+1:
			t.Fatalf("the sixth start wrote %v into the live index, want only [%s]", writes, ready.SessionID)
		}
	}
	if own != 1 {
		t.Fatalf("the sixth start wrote %v into the live index, want [%s] once", writes, ready.SessionID)
	}

	c.mgr.RenewLive(ctx)
	all := c.store.liveMarks()
	renewed := slices.Sorted(slices.Values(all[len(all)-1]))
	want := slices.Sorted(slices.Values(append(ids, ready.SessionID)))
	if !slices.Equal(renewed, want) {
		t.Errorf("the periodic renewal wrote %v, want all six sessions %v", renewed, want)
	}
}

// The live index's renewal goes by the session's clock: moved by a third
// of LiveTTL, it writes every session again (on the wall clock it would
// wait for real time instead, here 20 minutes).
func TestPresenceRenewsTheLiveIndexOnTheSessionsClock(t *testing.T) {
	fake := clock.NewFake(time.Now())
	c := newCoreWith(t, session.Config{Clock: fake, LiveTTL: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { c.mgr.RunPresence(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	_, ready := c.start(nil)
	has := func(from int) bool {
		for _, ids := range c.store.liveMarks()[from:] {
			if slices.Contains(ids, ready.SessionID) {
				return true
			}
		}
		return false
	}
	testwait.For(t, "the session's own write into the live index", func() bool { return has(0) })
	testwait.For(t, "the presence loop's renewal timer on the session's clock", func() bool { return fake.Timers() == 1 })
	before := len(c.store.liveMarks())
	fake.Advance(20 * time.Minute)
	testwait.For(t, "the renewal after a third of LiveTTL", func() bool { return has(before) })
}
