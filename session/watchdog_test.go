package session

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// The watchdog's decisions, with its timer's function called by hand on a
// clock the test moves.
func TestWatchdogCutsOnlyAWriteThatRanForTheTimeout(t *testing.T) {
	var expired atomic.Int32
	w := newWatchdog(time.Hour, 0, func(bool) { expired.Add(1) })
	defer w.stop()
	// The test calls check itself: the timer it re-arms (for as little as
	// a nanosecond, below) must not also run it on its own goroutine.
	w.t.Stop()
	w.t = time.AfterFunc(time.Hour, func() {})
	var now int64 = 1
	w.now = func() int64 { return now }
	sec := int64(time.Second)

	// Many quick writes over far more than the timeout: never cut.
	for range 10 {
		w.begin()
		now += sec
		w.end()
		now += 10 * 60 * sec
		w.check()
	}
	if expired.Load() != 0 {
		t.Fatalf("quick writes were cut %d times", expired.Load())
	}
	if w.armed.Load() {
		t.Errorf("with no write in progress the timer is still armed")
	}

	// A write in progress for less than the timeout: the timer is re-armed,
	// not fired.
	w.begin()
	if !w.armed.Load() {
		t.Fatalf("a write after a quiet spell did not arm the timer")
	}
	now += int64(time.Hour) - 1
	w.check()
	if expired.Load() != 0 {
		t.Fatalf("a write one nanosecond short of the timeout was cut")
	}
	// The same write, at the timeout: cut.
	now++
	w.check()
	if expired.Load() != 1 {
		t.Fatalf("a write stuck for the timeout was not cut (%d)", expired.Load())
	}
}

// The real timer cuts a write that never ends.
func TestWatchdogTimerCutsAStuckWrite(t *testing.T) {
	var expired atomic.Int32
	w := newWatchdog(20*time.Millisecond, 0, func(bool) { expired.Add(1) })
	defer w.stop()
	w.begin()
	w.end()
	w.begin() // stuck
	testwait.For(t, "the stuck write to be cut", func() bool { return expired.Load() == 1 })
}

// A write begun as slow (the voice pump's write of model audio) is cut at
// its shorter limit, and as too slow; a write begun after it is cut as
// failed again, at the timeout; the timer never waits longer than the
// shorter limit while a write is in progress, so that a slow write begun
// under a timer armed for a longer write is still cut at its own limit.
func TestWatchdogCutsASlowWriteAtItsLimitAsTooSlow(t *testing.T) {
	var cuts []bool
	w := newWatchdog(time.Hour, time.Minute, func(slow bool) { cuts = append(cuts, slow) })
	defer w.stop()
	// The test calls check itself (see above).
	w.t.Stop()
	w.t = time.AfterFunc(time.Hour, func() {})
	var now int64 = 1
	w.now = func() int64 { return now }
	minute := int64(time.Minute)

	w.beginSlow()
	now += minute - 1
	w.check()
	if len(cuts) != 0 {
		t.Fatalf("a write one nanosecond short of its limit was cut")
	}
	now++
	w.check()
	if len(cuts) != 1 || !cuts[0] {
		t.Fatalf("a write stuck for its limit: cuts %v, want one as too slow", cuts)
	}
	w.end()

	w.begin()
	now += 2 * minute
	w.check()
	if len(cuts) != 1 {
		t.Fatalf("a write past a slow write's limit but short of the timeout was cut")
	}
	w.end()
	w.beginSlow()
	now += minute
	w.check()
	if len(cuts) != 2 || !cuts[1] {
		t.Fatalf("a slow write after a long one, stuck for its limit: cuts %v, want a second as too slow", cuts)
	}
	w.end()
	w.begin()
	now += int64(time.Hour)
	w.check()
	if len(cuts) != 3 || cuts[2] {
		t.Fatalf("a write stuck for the timeout: cuts %v, want the third as failed", cuts)
	}
}

// The real timer, armed by a long write, cuts a slow write begun after it
// at the slow write's own limit, long before the timeout.
func TestWatchdogTimerCutsAStuckSlowWriteAtItsLimit(t *testing.T) {
	var slow atomic.Int32
	w := newWatchdog(time.Hour, 20*time.Millisecond, func(s bool) {
		if s {
			slow.Add(1)
		}
	})
	defer w.stop()
	w.begin()
	w.end()
	w.beginSlow() // stuck
	testwait.For(t, "the stuck slow write to be cut", func() bool { return slow.Load() == 1 })
}
