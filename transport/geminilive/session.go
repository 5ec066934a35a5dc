package geminilive

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/turnstile-gw/turnstile/internal/audiob64"
	"github.com/turnstile-gw/turnstile/internal/wsbuf"
	"github.com/turnstile-gw/turnstile/transport"
)

// ErrEnded is returned by sends after the connection ended on its own; the
// error wraps the cause Recv reports (or the failed write's error).
var ErrEnded = errors.New("gemini live: connection ended")

// A session's message buffers — the message read, the model audio decoded
// from it, the microphone frame written — are taken from bufs for one
// message and given back, so that a session waiting for its next message
// (most of its life) holds none: at a few hundred voice sessions the pool
// holds what the few in flight at once need, where each session used to
// keep about 6 KiB of its own. A buffer grown past keepBuffer (a big tool
// call) is dropped after use, so that one rare message does not pin memory.
const (
	keepBuffer = 256 << 10
	minBuffer  = 4 << 10
)

var bufs = sync.Pool{New: func() any { b := make([]byte, 0, minBuffer); return &b }}

// getBuf takes an empty buffer from bufs.
func getBuf() *[]byte {
	bp := bufs.Get().(*[]byte)
	*bp = (*bp)[:0]
	return bp
}

// putBuf gives bp back to bufs, unless it grew past keepBuffer.
func putBuf(bp *[]byte) {
	if cap(*bp) <= keepBuffer {
		bufs.Put(bp)
	}
}

// The realtimeInput audio frame, as the SDK writes it (keys sorted).
const (
	audioPrefix = `{"realtimeInput":{"audio":{"data":"`
	audioSuffix = `","mimeType":"audio/pcm;rate=16000"}}}`
	audioEnd    = `{"realtimeInput":{"audioStreamEnd":true}}`
)

// Session is one Gemini Live connection.
//
// Reads and writes go to the connection without a context: Close unblocks
// a blocked read, and every write is bounded by the connection's write
// deadline (see dialOptions). Writes come from several goroutines (the
// browser reader's microphone audio, the conversation's text and tool
// responses); the connection serialises them, and the reader's pongs,
// with its one write lock.
//
// Its fields are laid out for the voice path: what every send reads (the
// connection, whether it is still usable) shares the first cache line,
// written only when the connection fails; what Recv changes with every
// message is in the second. A microphone chunk's send then touches one line
// of the Session, which the pump's reads on the other core do not take away
// from it.
type Session struct {
	conn         *wsbuf.Client
	writeTimeout time.Duration
	werr         atomic.Pointer[error] // a write failed: nothing more is written
	dead         atomic.Bool           // err is set
	emu          sync.Mutex
	err          error // why the connection ended; the first cause wins
	closeOnce    sync.Once

	// Owned by the goroutine that calls Recv.
	rbuf   *[]byte               // from bufs: the message being read and handled; nil between messages
	pcm    *[]byte               // from bufs: the model audio of the events not yet all returned; else nil
	events []transport.LiveEvent // the last message's events
	next   int                   // the next event of events to return
}

var (
	_ transport.LiveSession = (*Session)(nil)
	_ transport.LiveFast    = (*Session)(nil)
)

func newSession(conn *wsbuf.Client, writeTimeout time.Duration) *Session {
	return &Session{conn: conn, writeTimeout: writeTimeout}
}

// handshake sends the setup, waits for setupComplete and seeds the
// history (seed may be nil).
func (s *Session) handshake(setup, seed []byte) error {
	if err := s.write(setup); err != nil {
		return fmt.Errorf("send setup: %w", err)
	}
	data, err := s.read()
	defer s.doneReading()
	if err != nil {
		return s.fail(readError(err))
	}
	msg, err := decodeMessage(data)
	if err != nil {
		return s.fail(err)
	}
	if msg.SetupComplete == nil {
		return s.fail(fmt.Errorf("gemini live: expected setupComplete, got %.200s", data))
	}
	if seed != nil {
		if err := s.write(seed); err != nil {
			return fmt.Errorf("seed history: %w", err)
		}
	}
	return nil
}

// Recv implements transport.LiveSession. Model audio is decoded into a
// buffer the session reuses, so Audio is valid only until the next call.
// Without allocating, it handles a message of model audio (the common
// case); anything else is decoded into genai.LiveServerMessage.
// setupComplete yields no event; usageMetadata a LiveTokens event after the
// message's other events.
func (s *Session) Recv() (transport.LiveEvent, error) {
	for {
		if s.dead.Load() {
			return transport.LiveEvent{}, s.cause()
		}
		if s.next < len(s.events) {
			ev := s.events[s.next]
			s.events[s.next] = transport.LiveEvent{}
			s.next++
			return ev, nil
		}
		s.events, s.next = s.events[:0], 0
		if s.pcm != nil { // the audio of the events returned: no longer valid
			putBuf(s.pcm)
			s.pcm = nil
		}
		data, err := s.read()
		if err != nil {
			s.doneReading()
			return transport.LiveEvent{}, s.fail(readError(err))
		}
		audio := s.scanAudio(data)
		var msg *serverMessage
		if !audio {
			msg, err = decodeMessage(data) // copies what it keeps
		}
		s.doneReading()
		if audio {
			continue
		}
		if err != nil {
			return transport.LiveEvent{}, s.fail(err)
		}
		s.events = appendEvents(s.events, &msg.LiveServerMessage)
		if msg.Usage != nil {
			s.events = append(s.events, msg.Usage.event())
		}
	}
}

// read waits for the next message holding no buffer, on a shallow stack
// (the reader's, not a frame-header read's, where a voice session's
// receiver spends most of its life), then reads it into a buffer from
// bufs, held until doneReading.
func (s *Session) read() ([]byte, error) {
	s.conn.Wait()
	if err := s.conn.Next(); err != nil {
		return nil, err
	}
	s.rbuf = getBuf()
	b := *s.rbuf
	for {
		if len(b) == cap(b) {
			b = slices.Grow(b, max(minBuffer, cap(b)))
		}
		n, err := s.conn.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	*s.rbuf = b
	return b, nil
}

// doneReading gives the read buffer back: the message read is handled.
func (s *Session) doneReading() {
	if s.rbuf != nil {
		putBuf(s.rbuf)
		s.rbuf = nil
	}
}

// readError turns the first read error into what Recv reports: the close
// frame's code and reason, 1006 when the peer vanished without one.
func readError(err error) error {
	var ce *wsbuf.CloseError
	switch {
	case errors.As(err, &ce):
		return &transport.CloseError{Code: ce.Code, Reason: ce.Reason}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &transport.CloseError{Code: abnormalClosure, Reason: "unexpected EOF"}
	case errors.Is(err, syscall.ECONNRESET):
		return &transport.CloseError{Code: abnormalClosure, Reason: "connection reset"}
	}
	return fmt.Errorf("gemini live: receive: %w", err)
}

// abnormalClosure is the close code of a connection that ended without a
// close frame (RFC 6455 §7.1.5).
const abnormalClosure = 1006

// SetAudioSink implements transport.LiveFast: on an event loop, a message
// of model audio alone (no flag) goes to sink where it is read, while the
// goroutine that calls Recv waits in its read.
func (s *Session) SetAudioSink(sink transport.AudioSink) bool {
	if !s.conn.OnLoop() {
		return false
	}
	if sink == nil {
		s.conn.SetFast(nil)
		return true
	}
	s.conn.SetFast(func(_ bool, p []byte) bool { return s.fast(sink, p) })
	return true
}

// SendsWait implements transport.LiveFast.
func (s *Session) SendsWait() bool { return !s.conn.OnLoop() }

// fast hands a message of model audio alone to the sink: the connection's
// fast path, on the loop's goroutine while Recv's waits in read (so it may
// use the read buffers). Anything else is left to Recv, as is everything
// while the sink is not ready.
func (s *Session) fast(sink transport.AudioSink, p []byte) bool {
	if s.dead.Load() || !sink.Ready() {
		return false
	}
	bp := getBuf()
	sc := scanner{b: p}
	a := audioMessage{pcm: (*bp)[:0]}
	ok := sc.message(&a) && a.n > 0 && !a.interrupted && !a.generationComplete && !a.turnComplete
	if ok {
		for _, sp := range a.spans[:a.n] {
			sink.Audio(a.pcm[sp[0]:sp[1]])
		}
	}
	*bp = a.pcm[:0]
	putBuf(bp)
	return ok
}

// SendAudio implements transport.LiveSession. The chunk is base64-encoded
// into a frame from bufs, given back once written: no allocation.
func (s *Session) SendAudio(pcm16k []byte) error {
	if len(pcm16k) == 0 {
		return nil
	}
	bp := getBuf()
	b := append(*bp, audioPrefix...)
	b = audiob64.AppendEncode(b, pcm16k)
	b = append(b, audioSuffix...)
	*bp = b
	err := s.write(b)
	putBuf(bp)
	return err
}

// SendAudioEnd implements transport.LiveSession.
func (s *Session) SendAudioEnd() error { return s.write([]byte(audioEnd)) }

// SendText implements transport.LiveSession.
func (s *Session) SendText(text string) error {
	if text == "" {
		return errors.New("gemini live: send text: empty text")
	}
	return s.sendContent(text, true)
}

// SendContext implements transport.LiveSession.
func (s *Session) SendContext(text string) error {
	if text == "" {
		return errors.New("gemini live: send context: empty text")
	}
	return s.sendContent(text, false)
}

func (s *Session) sendContent(text string, turnComplete bool) error {
	b, err := clientContent(liveHistory([]transport.Entry{{Role: transport.RoleUser, Text: text}}), turnComplete)
	if err != nil {
		return fmt.Errorf("gemini live: send text: %w", err)
	}
	return s.write(b)
}

// SendToolResponses implements transport.LiveSession.
func (s *Session) SendToolResponses(results []transport.FunctionResult) error {
	if len(results) == 0 {
		return nil
	}
	b, err := toolResponse(results)
	if err != nil {
		return fmt.Errorf("gemini live: send tool responses: %w", err)
	}
	return s.write(b)
}

// write writes one text frame (the SDK sends every client message as
// text). A write that times out ends the connection. Any other write error
// (the peer went away) only stops further writes: the reader is about to
// see why, and a close frame's code and reason say more than a broken
// pipe.
func (s *Session) write(b []byte) error {
	if err := s.unusable(); err != nil {
		return err
	}
	err := s.conn.WriteText(b)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		s.fail(fmt.Errorf("gemini live: write timed out (no progress in at least %v): the upstream is not reading", s.writeTimeout))
	default:
		werr := fmt.Errorf("gemini live: send: %w", err)
		s.werr.CompareAndSwap(nil, &werr)
	}
	return s.unusable()
}

// unusable is what a send returns once nothing more can be written, or
// nil.
func (s *Session) unusable() error {
	if s.dead.Load() {
		err := s.cause()
		if errors.Is(err, transport.ErrSessionClosed) {
			return err
		}
		return fmt.Errorf("%w: %w", ErrEnded, err)
	}
	if werr := s.werr.Load(); werr != nil {
		return fmt.Errorf("%w: %w", ErrEnded, *werr)
	}
	return nil
}

// Close implements transport.LiveSession. Like the SDK it sends no close
// frame: the upstream sees the connection drop (1006). Recv then returns
// transport.ErrSessionClosed unless the connection had already ended.
func (s *Session) Close() error {
	s.closeOnce.Do(func() { s.fail(transport.ErrSessionClosed) })
	return nil
}

// fail ends the connection for cause (unless it ended already) and
// returns the cause that stands.
func (s *Session) fail(cause error) error {
	s.emu.Lock()
	if s.err == nil {
		s.err = cause
		s.dead.Store(true)
	}
	err := s.err
	s.emu.Unlock()
	_ = s.conn.Close()
	return err
}

func (s *Session) cause() error {
	s.emu.Lock()
	defer s.emu.Unlock()
	return s.err
}
