package session

import (
	"sync"
	"time"
)

// A connection lasts as long as its token, plus AuthLeeway: then it is
// closed 4001, unless the browser sent a fresh token of the same user with
// an auth message first (auth.go).

// expiry is the connection's token deadline and the timer that enforces
// it. The reader (auth) and the connection's end use it; it locks.
type expiry struct {
	leeway  time.Duration
	clock   Clock
	expired func() // runs on its own goroutine at the deadline

	mu      sync.Mutex
	at      time.Time // when the token expires; zero: never
	timer   Timer
	stopped bool // the connection ended: never armed again
}

// init sets what expiry goes by: expired runs at the token's expiry plus
// leeway on clock. It is called before the first arm.
func (e *expiry) init(leeway time.Duration, clock Clock, expired func()) {
	e.leeway, e.clock, e.expired = leeway, clock, expired
}

// arm (re)starts the timer for a token that expires at: a fresh token
// replaces the deadline of the one before. A zero at never expires.
func (e *expiry) arm(at time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	e.at = at
	if at.IsZero() || e.stopped {
		return
	}
	e.timer = e.clock.AfterFunc(at.Add(e.leeway).Sub(e.clock.Now()), e.expired)
}

// stop stops the timer for good.
func (e *expiry) stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopped = true
	if e.timer != nil {
		e.timer.Stop()
	}
}
