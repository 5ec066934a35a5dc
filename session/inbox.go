package session

import (
	"sync"

	"github.com/turnstile-gw/turnstile/internal/stages"
	"github.com/turnstile-gw/turnstile/protocol"
)

// The conversation's inputs — session.start first, then what the user
// types, their answers to confirmations, the moves into and out of voice,
// turn.cancel, history pages — are acted on in order by a goroutine of
// their own, not by the connection's reader: the reader never waits for
// the store (the session's start or resume, a typed turn's first write, a
// confirmation's answer, the turn and voice-start limits), and pings never
// wait behind Redis, nor do microphone audio and auth once the session has
// started.
// The goroutine runs while inputs wait and ends when none do: an idle
// session holds no goroutine for it.

// inboxMax bounds the inputs waiting. A browser past it waits for its
// reader, which stops reading (the network's backpressure), as it did when
// the reader acted on each input itself.
const inboxMax = 32

// inbox is the inputs waiting for the conversation's goroutine.
type inbox struct {
	mu      sync.Mutex
	q       []protocol.ClientMessage // nil while empty
	running bool                     // the goroutine runs (or is starting)
	space   chan struct{}            // closed when q has room again; nil while the reader does not wait
	wg      sync.WaitGroup
}

// enqueue hands an input to the conversation's goroutine, starting it when
// none runs. It waits while inboxMax inputs wait, until the connection
// ends.
func (s *session) enqueue(msg protocol.ClientMessage) {
	in := &s.in
	in.mu.Lock()
	for len(in.q) >= inboxMax {
		if in.space == nil {
			in.space = make(chan struct{})
		}
		space := in.space
		in.mu.Unlock()
		select {
		case <-space:
		case <-s.ctx.Done():
			return
		}
		in.mu.Lock()
	}
	in.q = append(in.q, msg)
	start := !in.running
	if start {
		in.running = true
		in.wg.Add(1)
	}
	in.mu.Unlock()
	if start {
		go s.actOnInputs()
	}
}

// actOnInputs is the conversation's goroutine: it acts on the inputs in
// the order they came until none waits. Inputs left when the connection
// ends are dropped, and so are those after a session.start that did not
// start the session (the connection is closing).
//
// A typed turn whose model request starts at once runs on a goroutine of
// its own while this one makes the turn's store round trip at once: the
// verdict is what the request's body waits for (httphold.Hold), and the
// turn's goroutine runs as soon as this one waits for Redis's answer.
func (s *session) actOnInputs() {
	in := &s.in
	for {
		in.mu.Lock()
		if len(in.q) == 0 {
			in.q, in.running = nil, false
			in.mu.Unlock()
			in.wg.Done()
			return
		}
		msg := in.q[0]
		in.q[0] = protocol.ClientMessage{}
		in.q = in.q[1:]
		if in.space != nil {
			close(in.space)
			in.space = nil
		}
		in.mu.Unlock()
		switch {
		case msg.Type == protocol.TypeSessionStart:
			s.begin(msg) // whatever the context: the reader may wait for it
		case s.ctx.Err() == nil && s.started.Load():
			stages.Mark(stages.Input)
			run, admit := s.input(msg)
			if run != nil {
				go run()
			}
			if admit != nil {
				admit()
			}
		}
	}
}

// waitInputs returns when the conversation's goroutine has ended; the
// connection's context has ended, so it acts on nothing more.
func (s *session) waitInputs() { s.in.wg.Wait() }

// input acts on one input of the conversation, on its goroutine. A typed
// turn it starts is returned, to run (activity.openTextTurn).
func (s *session) input(msg protocol.ClientMessage) (run, admit func()) {
	switch msg.Type {
	case protocol.TypeText:
		return s.act.text(msg.Text)
	case protocol.TypeVoiceStart:
		s.act.requestVoice("client")
	case protocol.TypeVoiceStop:
		s.act.endVoice("client")
	case protocol.TypeConfirm:
		s.answerConfirm(msg.Token, msg.Approve)
	case protocol.TypeTurnCancel:
		s.act.cancelTurn()
	case protocol.TypeHistory:
		s.historyPage(msg.Before, msg.Limit)
	default:
		s.send(protocol.NewError(protocol.CodeUnsupported, msg.Type+" is not available yet", false, 0))
	}
	return nil, nil
}
