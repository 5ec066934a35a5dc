//go:build stages

package stages

import (
	"sync/atomic"
	"time"
)

// On reports whether marks are recorded (built with -tags stages).
const On = true

var (
	marks  [NumStages]atomic.Int64
	writes atomic.Int32
)

// Mark records the wall time of stage s unless it was marked since the
// last Take.
func Mark(s Stage) { marks[s].CompareAndSwap(0, time.Now().UnixNano()) }

// Wrote marks the connection writer's first and second frames since the
// last Take (Wrote1, Wrote2).
func Wrote() {
	switch writes.Add(1) {
	case 1:
		Mark(Wrote1)
	case 2:
		Mark(Wrote2)
	}
}

// Take returns the marks (Unix nanoseconds, 0 for a stage not reached) and
// clears them.
func Take() (t [NumStages]int64) {
	for i := range marks {
		t[i] = marks[i].Swap(0)
	}
	writes.Store(0)
	return t
}
