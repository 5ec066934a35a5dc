package session

import (
	"time"

	"github.com/turnstile-gw/turnstile/protocol"
)

// tokenExpired closes the connection 4001: its token expired without a
// refresh (expiry.go).
func (c *conn) tokenExpired() {
	if c.out.close(protocol.DisconnectTokenExpired, false) {
		c.refused(limitTokenExpired, c.m.now())
	}
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
	if err != nil || id.User != c.id.User {
		c.send(protocol.NewError(protocol.CodeUnauthenticated,
			"the token is not valid for this connection; reconnect with a fresh one", false, 0))
		if c.out.close(protocol.DisconnectUnauthenticated, false) {
			c.refused(limitAuth, c.m.now())
		}
		return false
	}
	c.exp.arm(id.ExpiresAt)
	ok := protocol.AuthOK{}
	if !id.ExpiresAt.IsZero() {
		ok.ExpiresAt = id.ExpiresAt.UTC().Format(time.RFC3339)
	}
	c.send(ok)
	return true
}
