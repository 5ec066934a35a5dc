package session

import (
	"time"

	"github.com/turnstile-gw/turnstile/protocol"
)

// A connection lasts as long as its token, plus AuthLeeway: then it is
// closed 4001, unless the browser sent a fresh token of the same user with
// an auth message first.

// expiry is the connection's token deadline and the timer that enforces
// it, under the connection's auth lock.
type expiry struct {
	at    time.Time // when the token expires; zero: never
	timer Timer
}

// armExpiry (re)starts the timer for a token that expires at; a zero time
// never expires.
func (c *conn) armExpiry(at time.Time) {
	c.authMu.Lock()
	defer c.authMu.Unlock()
	if c.exp.timer != nil {
		c.exp.timer.Stop()
		c.exp.timer = nil
	}
	c.exp.at = at
	if at.IsZero() {
		return
	}
	clock := c.m.cfg.Clock
	d := at.Add(c.m.cfg.AuthLeeway).Sub(clock.Now())
	c.exp.timer = clock.AfterFunc(d, func() {
		if c.out.close(protocol.DisconnectTokenExpired, false) {
			c.refused(limitTokenExpired, time.Now())
		}
	})
}

// stopExpiry stops the timer when the connection ends.
func (c *conn) stopExpiry() {
	c.authMu.Lock()
	defer c.authMu.Unlock()
	if c.exp.timer != nil {
		c.exp.timer.Stop()
	}
}

// reauth takes a fresh token (auth): the same user's valid token moves the
// connection's expiry and is answered auth.ok; any other is answered
// unauthenticated and closes the connection 4001. It reports whether the
// connection goes on.
func (c *conn) reauth(token string) bool {
	if c.m.Auth == nil {
		// Dev mode: no token is checked and nothing expires.
		c.send(protocol.AuthOK{Type: protocol.TypeAuthOK})
		return true
	}
	id, err := c.m.Auth.Verify(token)
	if err != nil || id.User != c.user {
		c.send(protocol.NewError(protocol.CodeUnauthenticated,
			"the token is not valid for this connection; reconnect with a fresh one", false, 0))
		if c.out.close(protocol.DisconnectUnauthenticated, false) {
			c.refused(limitAuth, time.Now())
		}
		return false
	}
	c.armExpiry(id.ExpiresAt)
	ok := protocol.AuthOK{Type: protocol.TypeAuthOK}
	if !id.ExpiresAt.IsZero() {
		ok.ExpiresAt = id.ExpiresAt.UTC().Format(time.RFC3339)
	}
	c.send(ok)
	return true
}
