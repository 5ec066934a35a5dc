package geminilive

import (
	"crypto/tls"

	"github.com/turnstile-gw/turnstile/transport"
)

// HeldBuffers reports which pooled buffers a session holds: the message
// being read, and the model audio of events not yet all returned.
func HeldBuffers(s transport.LiveSession) (read, audio bool) {
	gs := s.(*Session)
	return gs.rbuf != nil, gs.pcm != nil
}

// SetTLSConfig has m dial wss:// with c (a test's root of trust) instead
// of the system's roots.
func SetTLSConfig(m *Model, c *tls.Config) { m.dial.TLSConfig = c }
