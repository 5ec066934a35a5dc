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
	w := newWatchdog(time.Hour, func() { expired.Add(1) })
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
	w := newWatchdog(20*time.Millisecond, func() { expired.Add(1) })
	defer w.stop()
	w.begin()
	w.end()
	w.begin() // stuck
	testwait.For(t, "the stuck write to be cut", func() bool { return expired.Load() == 1 })
}
