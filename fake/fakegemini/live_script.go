package fakegemini

import "context"

// LiveScript is the Live brain for tests: the test itself is the model. Each
// new connection's session is delivered on Sessions(); the test reads its
// Events() and answers through its emitters. The connection stays open until
// the client hangs up, the test calls Close on the session, or the server
// closes. Sessions record every raw client frame (LiveSession.Frames).
type LiveScript struct {
	sessions chan *LiveSession
}

// NewLiveScript returns a script brain; up to 16 connected sessions wait
// for the test to take them.
func NewLiveScript() *LiveScript {
	return &LiveScript{sessions: make(chan *LiveSession, 16)}
}

// Sessions delivers each new connection's session, in connection order.
func (b *LiveScript) Sessions() <-chan *LiveSession { return b.sessions }

// ServeLive hands s to the test and holds the connection open until it
// ends.
func (b *LiveScript) ServeLive(ctx context.Context, s *LiveSession) error {
	select {
	case b.sessions <- s:
	case <-ctx.Done():
		return nil
	}
	<-ctx.Done()
	return nil
}

func (b *LiveScript) recordsFrames() {}
