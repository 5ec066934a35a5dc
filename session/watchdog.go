package session

import (
	"sync/atomic"
	"time"

	"github.com/turnstile-gw/turnstile/internal/clock"
)

// watchdog bounds each write to the browser by a timeout without timer
// work per frame: a write notes when it began (begin) and that it ended
// (end) — a clock read and two atomic stores — and one timer per
// connection, armed by the first write after it went quiet, looks at the
// write in progress when it fires. A write that has run for the timeout
// by then calls expire; a younger one has the timer re-armed for what it
// has left; with none in progress the timer goes quiet until the next
// write. So a stuck write is cut the timeout after it began, as with a
// timer reset and stopped around every write, and while audio streams
// (50 frames a second) the timer fires about once a timeout instead of
// being touched twice a frame.
//
// begin, end and stop are called by the writer (one at a time); the
// timer's function runs on its own goroutine.
type watchdog struct {
	timeout time.Duration
	expire  func()
	since   atomic.Int64 // when the write in progress began (monoNow); 0: none
	armed   atomic.Bool
	t       *time.Timer
	now     func() int64 // monoNow; a test's clock
}

// monoBase is the origin of monoNow.
var monoBase = clock.Wall.Now()

// monoNow is the monotonic clock in nanoseconds since monoBase, never 0.
func monoNow() int64 { return int64(clock.Wall.Since(monoBase)) | 1 }

func newWatchdog(timeout time.Duration, expire func()) *watchdog {
	w := &watchdog{timeout: timeout, expire: expire, now: monoNow}
	w.t = clock.Wall.FuncTimer(time.Hour, w.check)
	w.t.Stop()
	return w
}

// begin notes a write starting now.
func (w *watchdog) begin() {
	w.since.Store(w.now())
	if !w.armed.Load() && w.armed.CompareAndSwap(false, true) {
		w.t.Reset(w.timeout)
	}
}

// end notes that the write in progress is over.
func (w *watchdog) end() { w.since.Store(0) }

// stop disarms the timer for good: the writer has ended.
func (w *watchdog) stop() {
	w.t.Stop()
	w.since.Store(0)
}

// check is the timer's function.
func (w *watchdog) check() {
	s := w.since.Load()
	if s == 0 {
		w.armed.Store(false)
		// A write that began after the load saw armed still true and left
		// the timer to us: arm it for that write.
		if w.since.Load() != 0 && w.armed.CompareAndSwap(false, true) {
			w.t.Reset(w.timeout)
		}
		return
	}
	if left := w.timeout - time.Duration(w.now()-s); left > 0 {
		w.t.Reset(left)
		return
	}
	w.expire()
}
