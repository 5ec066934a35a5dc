// Package testwait is how tests wait for something to happen: they poll
// for the condition, never sleep for it and never assert on how long it
// took (CI shares a busy machine). It is the tree's one poll helper.
package testwait

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Timeout bounds every wait. It only ends a test that has already failed:
// on a busy machine under -race a slow-browser drop alone took over 5 s.
const Timeout = 30 * time.Second

// The first and the longest pause between two looks at a condition: one
// that holds at once costs a millisecond, one that takes long (a scrape of
// /metrics, a Redis round trip) is looked at every 20 ms.
const (
	firstInterval = time.Millisecond
	maxInterval   = 20 * time.Millisecond
)

var errNotYet = errors.New("the condition does not hold")

// For polls cond until it holds; after Timeout it fails t with what was
// awaited. Like t.Fatal it must be called from the test's goroutine.
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if poll(Timeout, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}) != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// ForNil polls check until it returns nil; after Timeout it fails t with
// what was awaited and check's last error, which says what the test saw
// instead. Like t.Fatal it must be called from the test's goroutine.
func ForNil(t testing.TB, what string, check func() error) {
	t.Helper()
	if err := poll(Timeout, check); err != nil {
		t.Fatalf("timed out waiting for %s: %v", what, err)
	}
}

// Poll polls check until it returns nil, or Timeout has passed, and returns
// check's last error: For and ForNil for a caller that does not fail the
// test when the wait fails (it tries something else).
func Poll(check func() error) error { return poll(Timeout, check) }

// poll calls check until it returns nil or timeout has passed, and returns
// its last error.
func poll(timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	pause := firstInterval
	for {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(pause)
		pause = min(2*pause, maxInterval)
	}
}

// Stacks are the stacks of every goroutine of the process, one a string,
// as runtime.Stack prints them: what a test looks through to see where a
// goroutine waits.
func Stacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// StackWith is the stack of the first goroutine whose stack has s in it,
// or "".
func StackWith(s string) string {
	for _, g := range Stacks() {
		if strings.Contains(g, s) {
			return g
		}
	}
	return ""
}
