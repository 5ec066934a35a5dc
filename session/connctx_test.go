package session

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// A connection's context behaves as context.WithCancel's for what derives
// from it — deadlines and AfterFuncs end with it, a stopped AfterFunc
// never runs — and a derived context that ends first leaves nothing
// registered on it (an idle session keeps no record of its start's store
// calls or of its pings).
func TestConnContextEndsWhatDerivesFromItAndKeepsNothingOfWhatEnded(t *testing.T) {
	var dropped atomic.Int32
	c := newConnCtx(context.Background(), func() { dropped.Add(1) })

	// Store calls and pings: derived, ended before the connection.
	for range 3 {
		ctx, cancel := context.WithTimeout(c, time.Hour)
		cancel()
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("a cancelled derived context: %v", ctx.Err())
		}
	}
	stopped := false
	stop := context.AfterFunc(c, func() { stopped = true })
	if !stop() {
		t.Fatal("an AfterFunc stopped before the end was not stopped")
	}
	c.mu.Lock()
	left := c.fns
	c.mu.Unlock()
	if left != nil {
		t.Fatal("derived contexts that ended are still registered on the connection's context")
	}

	// Derived while the connection lives: they end with it.
	child, cancelChild := context.WithTimeout(c, time.Hour)
	defer cancelChild()
	ran := make(chan struct{})
	context.AfterFunc(c, func() { close(ran) })
	if c.Err() != nil || child.Err() != nil {
		t.Fatalf("before the end: %v, %v", c.Err(), child.Err())
	}
	if !c.cancel() || c.cancel() {
		t.Fatal("cancel must end the context once")
	}
	<-c.Done()
	<-child.Done()
	<-ran
	if !errors.Is(c.Err(), context.Canceled) || !errors.Is(child.Err(), context.Canceled) {
		t.Fatalf("after the end: %v, %v", c.Err(), child.Err())
	}
	testwait.For(t, "the socket dropped once", func() bool { return dropped.Load() == 1 })
	if stopped {
		t.Fatal("a stopped AfterFunc ran")
	}

	// Derived after the end: done at once.
	late, cancelLate := context.WithCancel(c)
	defer cancelLate()
	<-late.Done()
}

// A connection served with a context that ends (ServeWire's caller's)
// ends with it, dropping its socket.
func TestConnContextEndsWithItsParent(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	var dropped atomic.Int32
	c := newConnCtx(parent, func() { dropped.Add(1) })
	cancel()
	<-c.Done()
	testwait.For(t, "the socket dropped", func() bool { return dropped.Load() == 1 })
	if c.cancel() {
		t.Fatal("a context its parent ended was ended again")
	}
}

// Err, read without the context's lock, keeps context's contract while a
// cancel runs beside it: nil while Done is open, Canceled once it is
// closed, never Canceled with Done still open.
func TestConnContextErrAgreesWithDoneDuringACancel(t *testing.T) {
	for range 200 {
		c := newConnCtx(context.Background(), func() {})
		seen := make(chan error, 1)
		go func() {
			for {
				err := c.Err()
				if err == nil {
					continue
				}
				select {
				case <-c.Done():
					seen <- nil
				default:
					seen <- errors.New("Err is Canceled while Done is open")
				}
				return
			}
		}()
		c.cancel()
		if err := <-seen; err != nil {
			t.Fatal(err)
		}
		if !errors.Is(c.Err(), context.Canceled) {
			t.Fatalf("Err after cancel = %v", c.Err())
		}
	}
}
