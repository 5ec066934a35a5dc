package geminilive

import "github.com/turnstile-gw/turnstile/transport"

// HeldBuffers reports which pooled buffers a session holds: the message
// being read, and the model audio of events not yet all returned.
func HeldBuffers(s transport.LiveSession) (read, audio bool) {
	gs := s.(*Session)
	return gs.rbuf != nil, gs.pcm != nil
}
