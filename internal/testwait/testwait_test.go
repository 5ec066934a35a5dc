package testwait

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// A condition that comes to hold while the test waits ends the wait; it is
// looked at until then, and not after.
func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	var looks atomic.Int64
	For(t, "the fifth look", func() bool { return looks.Add(1) == 5 })
	if n := looks.Load(); n != 5 {
		t.Fatalf("the condition was looked at %d times, want 5", n)
	}
	var calls int
	ForNil(t, "the third call", func() error {
		if calls++; calls < 3 {
			return fmt.Errorf("call %d", calls)
		}
		return nil
	})
	if calls != 3 {
		t.Fatalf("check called %d times, want 3", calls)
	}
}

// A condition that never holds ends the wait at the timeout with the
// check's last error, which the failure shows.
func TestPollGivesUpWithTheLastError(t *testing.T) {
	var n int
	err := poll(0, func() error { n++; return fmt.Errorf("look %d", n) })
	if err == nil || err.Error() != fmt.Sprintf("look %d", n) {
		t.Fatalf("poll = %v after %d looks, want the last look's error", err, n)
	}
	if err := poll(0, func() error { return nil }); err != nil {
		t.Fatalf("poll of a condition that holds = %v", err)
	}
}
