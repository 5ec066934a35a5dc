package session

import (
	"sync"
	"time"

	"github.com/turnstile-gw/turnstile/protocol"
)

// A connection lasts as long as its token, plus AuthLeeway: then it is
// closed 4001, unless the browser sent a fresh token of the same user with
// an auth message first.

// expiry is the connection's token deadline and the timer that enforces
// it. The reader (auth) and the connection's end use it; it locks.
type expiry struct {
	mu      sync.Mutex
	at      time.Time // when the token expires; zero: never
	timer   Timer
	stopped bool // the connection ended: never armed again
}

// arm (re)starts the timer: expired runs at at+leeway on clock; a zero at
// never expires.
func (e *expiry) arm(at time.Time, leeway time.Duration, clock Clock, expired func()) {
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
	e.timer = clock.AfterFunc(at.Add(leeway).Sub(clock.Now()), expired)
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

// armExpiry (re)starts the timer for a token that expires at; a zero time
// never expires.
func (c *conn) armExpiry(at time.Time) {
	c.exp.arm(at, c.m.cfg.AuthLeeway, c.m.cfg.Clock, func() {
		if c.out.close(protocol.DisconnectTokenExpired, false) {
			c.refused(limitTokenExpired, c.m.now())
		}
	})
}

// reauth takes a fresh token (auth): the same user's valid token moves the
// connection's expiry and is answered auth.ok; any other is answered
// unauthenticated and closes the connection 4001. It reports whether the
// connection goes on.
func (c *conn) reauth(token string) bool {
	if c.m.Auth == nil {
		// Dev mode: no token is checked and nothing expires.
		c.send(protocol.AuthOK{})
		return true
	}
	id, err := c.m.Auth.Verify(token)
	if err != nil || id.User != c.user {
		c.send(protocol.NewError(protocol.CodeUnauthenticated,
			"the token is not valid for this connection; reconnect with a fresh one", false, 0))
		if c.out.close(protocol.DisconnectUnauthenticated, false) {
			c.refused(limitAuth, c.m.now())
		}
		return false
	}
	c.armExpiry(id.ExpiresAt)
	ok := protocol.AuthOK{}
	if !id.ExpiresAt.IsZero() {
		ok.ExpiresAt = id.ExpiresAt.UTC().Format(time.RFC3339)
	}
	c.send(ok)
	return true
}
