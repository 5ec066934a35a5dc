package session

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// connCtx is a connection's context, the one its session, its writer and
// the deadlines of its store calls and pings derive from: done when the
// connection ends (cancel) or the context it was made from is.
//
// It is what context.WithCancel gives, kept smaller for the many
// connections that sit idle: a cancelCtx keeps the children map that its
// first derived context made (a session's start derives its store calls'
// deadlines, and every ping its write deadline) for as long as it lives,
// and the connection's context also carried an AfterFunc to drop the
// socket; about 0.4 KiB per connection in all. Here a derived context
// registers through AfterFunc (the context package calls it for a parent
// it does not know) as a list node that goes when the derived context
// ends, and cancel drops the socket itself.
type connCtx struct {
	done chan struct{}

	// canceled is set once, under mu; Err reads it without the lock (every
	// write to the browser asks first, model audio's 50 a second).
	canceled atomic.Bool

	mu       sync.Mutex
	fns      *afterFn    // registered and not run yet
	ended    func()      // run on its own goroutine at cancel
	unparent func() bool // stops the watch on the parent; nil: none
}

// afterFn is a function to run when the context is cancelled.
type afterFn struct {
	f          func() // nil once run or stopped
	prev, next *afterFn
}

// newConnCtx is a context done when cancel is called, or when parent is;
// then ended runs, on a goroutine of its own.
func newConnCtx(parent context.Context, ended func()) *connCtx {
	c := &connCtx{done: make(chan struct{}), ended: ended}
	if parent.Done() != nil {
		c.unparent = context.AfterFunc(parent, func() { c.cancel() })
	}
	return c
}

func (c *connCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *connCtx) Done() <-chan struct{}       { return c.done }
func (c *connCtx) Value(any) any               { return nil }

func (c *connCtx) Err() error {
	if c.canceled.Load() {
		// Set just before done closes: as context's own, wait for it, so
		// that Err is never Canceled while Done is still open.
		<-c.done
		return context.Canceled
	}
	return nil
}

// AfterFunc runs f on its own goroutine once the context is cancelled
// (at once if it is), unless stop is called first; stop reports whether
// it stopped f. It is what context.AfterFunc and the contexts derived
// from this one use.
func (c *connCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.canceled.Load() {
		go f()
		return func() bool { return false }
	}
	n := &afterFn{f: f, next: c.fns}
	if c.fns != nil {
		c.fns.prev = n
	}
	c.fns = n
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if n.f == nil {
			return false
		}
		n.f = nil
		if n.prev != nil {
			n.prev.next = n.next
		} else {
			c.fns = n.next
		}
		if n.next != nil {
			n.next.prev = n.prev
		}
		n.prev, n.next = nil, nil
		return true
	}
}

// cancel ends the context: Done closes and the functions registered run.
// It reports whether this call ended it.
func (c *connCtx) cancel() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.canceled.Load() {
		return false
	}
	c.canceled.Store(true)
	close(c.done)
	go c.ended()
	for n := c.fns; n != nil; n = n.next {
		go n.f()
		n.f = nil
	}
	c.fns = nil
	if c.unparent != nil {
		c.unparent()
	}
	return true
}
