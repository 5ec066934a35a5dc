package session

import "sync/atomic"

// latch is a channel closed once, made only when something waits on it.
// A connection has three such signals (its end, its close decided, its
// writer's end); an idle one is waited on by nobody, and a channel is
// about 0.1 KiB. close, wait and isClosed may be called from anywhere, any
// number of times.
type latch struct{ p atomic.Pointer[chan struct{}] }

// wait is a channel closed once close has been called.
func (l *latch) wait() <-chan struct{} {
	if p := l.p.Load(); p != nil {
		return *p
	}
	ch := make(chan struct{})
	if l.p.CompareAndSwap(nil, &ch) {
		return ch
	}
	return *l.p.Load() // made meanwhile by another wait, or closed
}

// close closes the channel that wait gave or will give.
func (l *latch) close() {
	if p := l.p.Swap(&closed); p != nil && p != &closed {
		close(*p)
	}
}

// isClosed reports whether close has been called.
func (l *latch) isClosed() bool { return l.p.Load() == &closed }
