package session

import (
	"sync/atomic"
	"time"

	"github.com/turnstile-gw/turnstile/internal/clock"
)

// watchdog bounds each write to the browser by a timeout without timer
// work per frame: a write notes when it is to be cut (begin) and that it
// ended (end) — a clock read and two atomic stores — and one timer per
// connection, armed by the first write after it went quiet, looks at the
// write in progress when it fires. A write past its cut by then calls
// expire; a younger one has the timer re-armed for what it has left; with
// none in progress the timer goes quiet until the next write. So a stuck
// write is cut the timeout after it began, as with a timer reset and
// stopped around every write, and while audio streams (50 frames a second)
// the timer fires about once a timeout instead of being touched twice a
// frame.
//
// A write may instead be begun as one cut as too slow rather than as
// failed, after a shorter limit (beginSlow: model audio written by the
// voice pump itself, outbound.go). The timer then fires at least that
// often while writes are in progress, so that each write is cut at its own
// limit.
//
// begin, end and stop are called by the writer (one at a time); the
// timer's function runs on its own goroutine.
type watchdog struct {
	timeout time.Duration
	slowFor time.Duration // beginSlow's limit, at most the timeout: the timer's longest wait
	// expire cuts the write in progress; slow: begun by beginSlow.
	expire func(slow bool)
	until  atomic.Int64 // when the write in progress is cut (monoNow); 0: none
	slow   atomic.Bool  // it was begun by beginSlow; stored before until
	armed  atomic.Bool
	t      *time.Timer
	now    func() int64 // monoNow; a test's clock
}

// monoBase is the origin of monoNow.
var monoBase = clock.Wall.Now()

// monoNow is the monotonic clock in nanoseconds since monoBase, never 0.
func monoNow() int64 { return int64(clock.Wall.Since(monoBase)) | 1 }

// newWatchdog cuts writes after timeout, or those begun by beginSlow after
// slowFor (at most timeout; 0: timeout).
func newWatchdog(timeout, slowFor time.Duration, expire func(slow bool)) *watchdog {
	if slowFor <= 0 || slowFor > timeout {
		slowFor = timeout
	}
	w := &watchdog{timeout: timeout, slowFor: slowFor, expire: expire, now: monoNow}
	w.t = clock.Wall.FuncTimer(time.Hour, w.check)
	w.t.Stop()
	return w
}

// begin notes a write starting now, cut as failed after the timeout.
func (w *watchdog) begin() { w.beginFor(w.timeout, false) }

// beginSlow notes a write starting now, cut as too slow after slowFor.
func (w *watchdog) beginSlow() { w.beginFor(w.slowFor, true) }

func (w *watchdog) beginFor(limit time.Duration, slow bool) {
	w.slow.Store(slow)
	w.until.Store(w.now() + int64(limit))
	if !w.armed.Load() && w.armed.CompareAndSwap(false, true) {
		w.t.Reset(w.slowFor)
	}
}

// end notes that the write in progress is over.
func (w *watchdog) end() { w.until.Store(0) }

// stop disarms the timer for good: the writer has ended.
func (w *watchdog) stop() {
	w.t.Stop()
	w.until.Store(0)
}

// check is the timer's function.
func (w *watchdog) check() {
	u := w.until.Load()
	if u == 0 {
		w.armed.Store(false)
		// A write that began after the load saw armed still true and left
		// the timer to us: arm it for that write.
		if w.until.Load() != 0 && w.armed.CompareAndSwap(false, true) {
			w.t.Reset(w.slowFor)
		}
		return
	}
	// Not longer than slowFor: a write begun by beginSlow meanwhile is cut
	// at its own limit.
	if left := time.Duration(u - w.now()); left > 0 {
		w.t.Reset(min(left, w.slowFor))
		return
	}
	w.expire(w.slow.Load())
}
