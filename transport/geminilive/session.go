package geminilive

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/transport"
)

const (
	// eventBuffer is how many translated events wait for the consumer
	// before the receiver stops reading the upstream.
	eventBuffer = 64
	// sendFailGrace is how long a sender whose write failed waits for the
	// receiver to see why (a close frame carries a code and a reason)
	// before it closes the connection itself.
	sendFailGrace = time.Second
)

var (
	// ErrClosed is returned by sends after Close.
	ErrClosed = errors.New("gemini live: session closed")
	// ErrEnded is returned by sends after the connection ended on its own;
	// the error wraps Err when it is known.
	ErrEnded = errors.New("gemini live: connection ended")
)

// outgoing is one queued write; only the sender goroutine runs it.
type outgoing func(up *genai.Session) error

// Session is one Gemini Live connection. It owns two goroutines: a
// receiver, the only caller of Receive, and a sender, the only caller of
// the SDK's Send methods. Both end when the connection ends or Close is
// called.
type Session struct {
	up     *genai.Session
	events chan transport.LiveEvent
	queue  chan outgoing

	done     chan struct{} // closed by Close
	dead     chan struct{} // closed once nothing more can be sent
	recvDone chan struct{} // closed when the receiver has returned
	closing  atomic.Bool
	wg       sync.WaitGroup

	closeOnce sync.Once
	deadOnce  sync.Once
	upOnce    sync.Once

	mu  sync.Mutex
	err error
}

var _ transport.LiveSession = (*Session)(nil)

// start wraps a connected upstream and starts its goroutines.
func start(up *genai.Session, sendQueue int) *Session {
	s := &Session{
		up:       up,
		events:   make(chan transport.LiveEvent, eventBuffer),
		queue:    make(chan outgoing, sendQueue),
		done:     make(chan struct{}),
		dead:     make(chan struct{}),
		recvDone: make(chan struct{}),
	}
	s.wg.Add(2)
	go s.receive()
	go s.send()
	return s
}

// Events delivers what the upstream says, in order. It is closed when the
// connection ends; Err then says why. The channel is bounded: a consumer
// that stops reading stops the receiver too (and so, eventually, the
// upstream), so the session must drain it promptly.
func (s *Session) Events() <-chan transport.LiveEvent { return s.events }

// Err is why the connection ended: a *transport.CloseError for a close
// frame (1006 when the upstream vanished without one), another error for a
// broken connection, nil after Close or while the connection is up.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// audioInMIME declares the PCM the gateway sends: 16-bit little-endian mono
// at 16 kHz. It must never be empty: the SDK panics on an empty MIME type.
const audioInMIME = "audio/pcm;rate=16000"

// SendAudio queues one chunk of PCM16LE mono 16 kHz audio (pcm is copied).
// Chunks from one goroutine are sent in order.
func (s *Session) SendAudio(pcm16k []byte) error {
	if len(pcm16k) == 0 {
		return nil
	}
	in := genai.LiveRealtimeInput{Audio: &genai.Blob{MIMEType: audioInMIME, Data: append([]byte(nil), pcm16k...)}}
	return s.enqueue(func(up *genai.Session) error { return up.SendRealtimeInput(in) })
}

// SendAudioEnd queues an audioStreamEnd: the microphone paused, so the
// upstream should flush what it buffered.
func (s *Session) SendAudioEnd() error {
	return s.enqueue(func(up *genai.Session) error {
		return up.SendRealtimeInput(genai.LiveRealtimeInput{AudioStreamEnd: true})
	})
}

// SendText queues a complete user turn typed as text.
func (s *Session) SendText(text string) error {
	if text == "" {
		return errors.New("gemini live: send text: empty text")
	}
	in := genai.LiveClientContentInput{Turns: genai.Text(text), TurnComplete: genai.Ptr(true)}
	return s.enqueue(func(up *genai.Session) error { return up.SendClientContent(in) })
}

// SendContext queues a user-role note that joins the conversation without
// asking the model to answer (clientContent with turnComplete false).
func (s *Session) SendContext(text string) error {
	if text == "" {
		return errors.New("gemini live: send context: empty text")
	}
	in := genai.LiveClientContentInput{Turns: genai.Text(text), TurnComplete: genai.Ptr(false)}
	return s.enqueue(func(up *genai.Session) error { return up.SendClientContent(in) })
}

// SendToolResponses queues the results of tool calls, each under its call's
// ID and name.
func (s *Session) SendToolResponses(results []transport.FunctionResult) error {
	if len(results) == 0 {
		return nil
	}
	frs := make([]*genai.FunctionResponse, 0, len(results))
	for _, r := range results {
		frs = append(frs, &genai.FunctionResponse{ID: r.ID, Name: r.Name, Response: r.Response})
	}
	in := genai.LiveToolResponseInput{FunctionResponses: frs}
	return s.enqueue(func(up *genai.Session) error { return up.SendToolResponse(in) })
}

// enqueue hands w to the sender without ever blocking.
func (s *Session) enqueue(w outgoing) error {
	select {
	case <-s.done:
		return ErrClosed
	default:
	}
	select {
	case <-s.dead:
		if err := s.Err(); err != nil {
			return fmt.Errorf("%w: %w", ErrEnded, err)
		}
		return ErrEnded
	default:
	}
	select {
	case s.queue <- w:
		return nil
	default:
		return transport.ErrBackpressure
	}
}

// Flush returns once everything queued before it has been written to the
// upstream, or ctx ends, or the connection ends. Used before closing a
// session that is being replaced, so that audio already accepted is not
// thrown away.
func (s *Session) Flush(ctx context.Context) error {
	written := make(chan struct{})
	marker := func(*genai.Session) error { close(written); return nil }
	for _, wait := range []chan struct{}{nil, written} {
		if wait == nil {
			select {
			case s.queue <- marker:
				continue
			case <-ctx.Done():
				return ctx.Err()
			case <-s.done:
				return ErrClosed
			case <-s.dead:
				return ErrEnded
			}
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return ErrClosed
		case <-s.dead:
			return ErrEnded
		}
	}
	return nil
}

// Close ends the connection and returns once both goroutines have. It is
// idempotent and safe from any goroutine; after it Err stays nil unless the
// connection had already ended on its own.
func (s *Session) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.closing.Store(true)
		close(s.done)
		err = s.closeUp()
		s.wg.Wait()
	})
	return err
}

// receive is the only caller of Receive. It stops at the first error:
// errors are permanent, and gorilla panics after ~1000 reads on a failed
// connection.
func (s *Session) receive() {
	defer s.wg.Done()
	defer close(s.events)
	defer close(s.recvDone)
	for {
		msg, err := s.up.Receive()
		if err != nil {
			s.setErr(receiveError(err))
			s.markDead()
			_ = s.closeUp()
			return
		}
		for _, ev := range events(msg) {
			select {
			case s.events <- ev:
			case <-s.done:
				return
			}
		}
	}
}

// send is the only caller of the SDK's Send methods: the SDK's Session is
// not safe for concurrent writes.
func (s *Session) send() {
	defer s.wg.Done()
	for {
		select {
		case <-s.done:
			return
		case <-s.dead:
			return
		case w := <-s.queue:
			if err := w(s.up); err != nil {
				s.sendFailed(err)
				return
			}
		}
	}
}

// sendFailed stops further sends and lets the receiver report the cause;
// if the receiver does not notice within sendFailGrace, the write error
// becomes Err and the connection is closed so that the receiver returns.
func (s *Session) sendFailed(err error) {
	s.markDead()
	t := time.NewTimer(sendFailGrace)
	defer t.Stop()
	select {
	case <-s.recvDone:
	case <-s.done:
	case <-t.C:
		s.setErr(fmt.Errorf("gemini live: send: %w", err))
		_ = s.closeUp()
	}
}

// receiveError turns the SDK's first Receive error into Err.
func receiveError(err error) error {
	if ce := closeError(err); ce != nil {
		return ce
	}
	return fmt.Errorf("gemini live: receive: %w", err)
}

// closeError extracts the close frame (the SDK's gorilla/websocket error)
// behind err, or returns nil.
func closeError(err error) *transport.CloseError {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return &transport.CloseError{Code: ce.Code, Reason: ce.Text}
	}
	return nil
}

// setErr records why the connection ended; the first cause wins, and an
// end caused by Close is no error.
func (s *Session) setErr(err error) {
	if s.closing.Load() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

func (s *Session) markDead() { s.deadOnce.Do(func() { close(s.dead) }) }

// closeUp closes the upstream connection once; the SDK sends no close
// frame, so the server sees the TCP connection end (1006).
func (s *Session) closeUp() error {
	var err error
	s.upOnce.Do(func() {
		if cerr := s.up.Close(); cerr != nil {
			err = fmt.Errorf("gemini live: close: %w", cerr)
		}
	})
	return err
}

// Recv implements transport.LiveSession on the event channel: the next
// event, or why the connection ended.
func (s *Session) Recv() (transport.LiveEvent, error) {
	if ev, ok := <-s.events; ok {
		return ev, nil
	}
	if err := s.Err(); err != nil {
		return transport.LiveEvent{}, err
	}
	return transport.LiveEvent{}, transport.ErrSessionClosed
}
