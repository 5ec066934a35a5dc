package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/telephony/twilio/caller"
)

const (
	// setupTimeout bounds the connect, session.ready and the switch to voice.
	setupTimeout = 10 * time.Second
	// writeTimeout bounds one frame's write; a gateway that does not read
	// for this long has failed the session.
	writeTimeout = 5 * time.Second
	// lateFrame is how far behind schedule a frame may be sent before it
	// counts as late: half a frame.
	lateFrame = frameDur / 2
	// readLimit is the largest message accepted from the gateway.
	readLimit = 1 << 20
)

// streamPlan is what every session shares: where to connect and what to
// send. It is read-only once built.
type streamPlan struct {
	url     string
	header  http.Header
	client  *http.Client
	sched   schedule
	speech  []byte // sched.speech frames of speech
	silence []byte // one frame of silence
	live    *atomic.Int64
	relay   *relayPlan // the relay load instead of speech and silence; nil for speech
	// twilio: place phone calls to the webhook at url instead.
	twilio          bool
	twilioAuthToken string
	calls           atomic.Int64 // calls placed, numbering their callers
}

// sessionResult is what one session saw.
type sessionResult struct {
	ok          bool            // streamed until the end of the run, nothing broke
	failed      bool            // something ended the session early
	voice       bool            // reached voice mode
	turns       map[string]int  // turn.done by reason
	latencies   []time.Duration // speech end → first model audio
	exchanges   int             // speech ends sent
	unanswered  int             // speech ends with no model audio before the next speech
	cutOff      int             // speech ends still waiting when the run ended
	interrupted int             // audio.interrupted events
	bytesOut    int64           // audio sent
	bytesIn     int64           // audio received
	framesSent  int             // audio frames sent
	framesLate  int             // frames sent more than lateFrame behind schedule
	maxLag      time.Duration   // the latest frame's delay behind schedule
	errors      map[string]int  // by kind
	relay       relayResult     // the relay load's chunks (-relay)
}

// voiceSession is one connection; the streaming goroutine and the reader
// share it.
type voiceSession struct {
	plan  *streamPlan
	conn  *websocket.Conn
	call  *caller.Call // a phone call's stream, instead of conn
	probe *relayProbe  // the relay load's chunks; nil for speech

	ready    chan struct{} // closed at session.ready
	voice    chan struct{} // closed at mode voice
	fallback chan struct{} // closed at mode text after voice
	readDone chan struct{} // closed when the reader stops
	closing  atomic.Bool   // we are closing: a read error is expected

	mu        sync.Mutex
	res       sessionResult
	speechEnd time.Time // the unanswered speech end, or zero
	readyOnce sync.Once
	voiceOnce sync.Once
	fallOnce  sync.Once
}

// runSession connects, switches to voice and streams until ctx ends, then
// closes. It never returns before its goroutines have stopped.
func runSession(ctx context.Context, plan *streamPlan) sessionResult {
	s := &voiceSession{plan: plan,
		ready: make(chan struct{}), voice: make(chan struct{}), fallback: make(chan struct{}),
		readDone: make(chan struct{}),
		res:      sessionResult{turns: map[string]int{}, errors: map[string]int{}},
	}
	if plan.relay != nil {
		s.probe = &relayProbe{plan: plan.relay}
	}
	if plan.twilio {
		if err := s.dial(ctx); err != nil {
			s.fail(err.Error())
			return s.res
		}
		go s.readCall()
	} else {
		if err := s.connect(ctx); err != nil {
			s.fail(err.Error())
			return s.res
		}
		go s.read()
		if err := s.setup(ctx); err != nil {
			s.fail(err.Error())
			s.closing.Store(true)
			_ = s.conn.CloseNow()
			<-s.readDone
			return s.finish()
		}
	}
	plan.live.Add(1)
	var ended bool
	if s.probe != nil {
		if ended = s.streamRelay(ctx); ended {
			s.probe.awaitAnswers(s.readDone)
		}
	} else {
		ended = s.stream(ctx)
	}
	plan.live.Add(-1)
	s.closing.Store(true)
	s.hangUp(ended)
	<-s.readDone
	res := s.finish()
	res.ok = ended && !res.failed
	return res
}

func (s *voiceSession) connect(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	conn, err := dial(dctx, s.plan.url, s.plan.client, s.plan.header)
	if err != nil {
		return err
	}
	s.conn = conn
	return nil
}

// dial opens a browser's WebSocket to the gateway (the Turnstile
// subprotocol, the load generator's read limit); its error says only
// "connect" or the HTTP status that refused it.
func dial(ctx context.Context, url string, client *http.Client, header http.Header) (*websocket.Conn, error) {
	conn, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		HTTPClient: client, HTTPHeader: header, Subprotocols: []string{protocol.Subprotocol},
	})
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, fmt.Errorf("connect: http %d", resp.StatusCode)
		}
		return nil, errors.New("connect")
	}
	conn.SetReadLimit(readLimit)
	return conn, nil
}

// setup sends session.start, waits for session.ready, sends voice.start
// and waits for mode voice.
func (s *voiceSession) setup(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	steps := []struct {
		msg, step string
		wait      chan struct{}
	}{
		{`{"type":"session.start"}`, "session.ready", s.ready},
		{`{"type":"voice.start"}`, "mode voice", s.voice},
	}
	for _, st := range steps {
		if err := s.write(websocket.MessageText, []byte(st.msg)); err != nil {
			return fmt.Errorf("setup: send before %s", st.step)
		}
		select {
		case <-st.wait:
		case <-s.readDone:
			return fmt.Errorf("setup: closed before %s", st.step)
		case <-sctx.Done():
			return fmt.Errorf("setup: no %s", st.step)
		}
	}
	s.mu.Lock()
	s.res.voice = true
	s.mu.Unlock()
	return nil
}

// stream sends frames at real-time pace until ctx ends (true) or the
// session breaks (false).
func (s *voiceSession) stream(ctx context.Context) bool {
	sched := s.plan.sched
	ticker := time.NewTicker(frameDur)
	defer ticker.Stop()
	start := time.Now()
	for i := 0; ; {
		for due := dueFrames(start, time.Now()); i < due; i++ {
			if err := s.sendFrame(sched, start, i); err != nil {
				if !s.closing.Load() && ctx.Err() == nil {
					s.fail(err.Error())
				}
				return false
			}
		}
		select {
		case <-ctx.Done():
			return true
		case <-s.readDone:
			return false
		case <-s.fallback:
			return false
		case <-ticker.C:
		}
	}
}

func (s *voiceSession) sendFrame(sched schedule, start time.Time, i int) error {
	frame := s.plan.silence
	if k, speech := sched.speechFrame(i); speech {
		frame = s.plan.speech[k*frameBytes : (k+1)*frameBytes]
	}
	now := time.Now()
	lag := now.Sub(dueAt(start, i))
	s.mu.Lock()
	switch {
	case i > 0 && sched.speechStart(i) && !s.speechEnd.IsZero():
		s.res.unanswered++
		s.speechEnd = time.Time{}
	case sched.speechEnd(i):
		s.res.exchanges++
		s.speechEnd = now
	}
	s.res.framesSent++
	s.res.bytesOut += int64(len(frame))
	s.res.maxLag = max(s.res.maxLag, lag)
	if lag > lateFrame {
		s.res.framesLate++
	}
	s.mu.Unlock()
	if err := s.write(websocket.MessageBinary, frame); err != nil {
		return errors.New("write")
	}
	return nil
}

func (s *voiceSession) write(typ websocket.MessageType, p []byte) error {
	// Not the run's context: an expiring context closes the connection
	// mid-write, and the run's end should close it with a handshake.
	wctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	return s.conn.Write(wctx, typ, p)
}

// serverEvent is the part of a gateway event the load generator reads.
type serverEvent struct {
	Type   string        `json:"type"`
	Mode   protocol.Mode `json:"mode"`
	Reason string        `json:"reason"`
	Code   string        `json:"code"`
}

// read drains everything the gateway sends, promptly, until the
// connection ends: a slow reader would overflow the gateway's send queue.
func (s *voiceSession) read() {
	defer close(s.readDone)
	var buf []byte
	for {
		typ, r, err := s.conn.Reader(context.Background())
		if err == nil {
			buf, err = readAll(r, buf[:0])
		}
		data := buf
		if err != nil {
			if !s.closing.Load() {
				if code := websocket.CloseStatus(err); code != -1 {
					s.fail(fmt.Sprintf("close %d", code))
				} else {
					s.fail("read")
				}
			}
			return
		}
		if typ == websocket.MessageBinary {
			now := time.Now()
			if s.probe != nil {
				s.probe.onAnswer(data, now)
			}
			s.onAudio(now, len(data))
			continue
		}
		var ev serverEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			s.count("bad event")
			continue
		}
		s.onEvent(ev)
	}
}

func (s *voiceSession) onAudio(now time.Time, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.res.bytesIn += int64(n)
	if !s.speechEnd.IsZero() {
		s.res.latencies = append(s.res.latencies, now.Sub(s.speechEnd))
		s.speechEnd = time.Time{}
	}
}

func (s *voiceSession) onEvent(ev serverEvent) {
	switch ev.Type {
	case protocol.TypeSessionReady:
		s.readyOnce.Do(func() { close(s.ready) })
	case protocol.TypeMode:
		switch {
		case ev.Mode == protocol.ModeVoice:
			s.voiceOnce.Do(func() { close(s.voice) })
		case isClosed(s.voice):
			s.fail("mode text: " + ev.Reason)
			s.fallOnce.Do(func() { close(s.fallback) })
		}
	case protocol.TypeTurnDone:
		s.mu.Lock()
		s.res.turns[ev.Reason]++
		s.mu.Unlock()
	case protocol.TypeAudioInterrupted:
		s.mu.Lock()
		s.res.interrupted++
		s.mu.Unlock()
	case protocol.TypeError:
		s.count("error " + ev.Code)
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// count records an error of kind that does not end the session.
func (s *voiceSession) count(kind string) {
	s.mu.Lock()
	s.res.errors[kind]++
	s.mu.Unlock()
}

// fail records an error of kind that ends the session.
func (s *voiceSession) fail(kind string) {
	s.mu.Lock()
	s.res.errors[kind]++
	s.res.failed = true
	s.mu.Unlock()
}

// finish settles the session's result once its goroutines have stopped.
func (s *voiceSession) finish() sessionResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.speechEnd.IsZero() {
		s.res.cutOff++
	}
	if s.probe != nil {
		s.res.relay = s.probe.result()
	}
	return s.res
}
