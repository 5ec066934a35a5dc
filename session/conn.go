package session

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/loopdetect"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/transport"
)

// conn is one browser connection and the session it carries. Its
// goroutines: the reader (the caller of run), the writer, and at most one
// running turn. They share ctx; when one fails, all stop.
type conn struct {
	m    *Manager
	ws   *websocket.Conn
	q    *queue
	user string
	log  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when run has returned

	closeOnce   sync.Once
	closeCode   websocket.StatusCode
	closeReason string
	closeNow    bool // drop the queue instead of flushing it
	closing     chan struct{}

	loops *loopdetect.Detector // the session's loop history (last turns)

	mu           sync.Mutex // guards the fields below
	rec          store.Record
	history      []transport.Entry
	dirty        bool // the store missed a write; Sync at the next one
	turns        int
	reason       string    // disconnect reason for metrics
	blockedUntil time.Time // input refused until then (ignore_user)
	// voiceAfterTurn: START_VOICE_SESSION was applied; switch when the
	// text turn ends.
	voiceAfterTurn bool

	voice   *voice // non-nil while the session is in voice mode (guarded by mu)
	voiceWG sync.WaitGroup

	storeJobs chan func() // ordered store writes (see write, writeAsync)

	turnMu     sync.Mutex // guards the running turn; taken before mu
	turnCancel context.CancelFunc
	turnDone   chan struct{} // closed when the running turn has ended
	turnWG     sync.WaitGroup
}

func newConn(m *Manager, ws *websocket.Conn, user string) *conn {
	return &conn{
		m: m, ws: ws, user: user, q: newQueue(m.cfg.SendQueueBytes), log: m.Log,
		done: make(chan struct{}), closing: make(chan struct{}),
		loops:     loopdetect.New(m.Orchestrator.Config().LoopTurns),
		storeJobs: make(chan func(), 64),
	}
}

// run serves the connection until it ends and leaves nothing running.
func (c *conn) run(parent context.Context) {
	defer close(c.done)
	c.ctx, c.cancel = context.WithCancel(parent)
	defer c.cancel()
	c.ws.SetReadLimit(c.m.cfg.MaxMessageBytes)

	writerDone := make(chan struct{})
	go func() { defer close(writerDone); c.writer() }()
	storeDone := make(chan struct{})
	go c.runStore(storeDone)

	started := time.Now()
	ok := c.handshake()
	if ok {
		c.readLoop()
	}
	select {
	case <-c.closing:
		// Let the writer flush what explains the close, and send the close
		// frame, before everything stops.
		select {
		case <-writerDone:
		case <-time.After(2 * c.m.cfg.WriteTimeout):
		}
	default:
	}
	c.cancel()
	c.stopVoice()
	c.turnWG.Wait()
	close(c.storeJobs) // every writer has stopped; queued writes still land
	<-storeDone
	<-writerDone
	_ = c.ws.CloseNow()

	c.mu.Lock()
	reason, mode, turns := c.reason, c.rec.Mode, c.turns
	c.mu.Unlock()
	if reason == "" {
		reason = "read_failed"
	}
	c.m.Metrics.BrowserDisconnect.WithLabelValues(reason).Inc()
	if ok {
		c.m.Metrics.SessionsActive.WithLabelValues(mode).Dec()
		c.m.Metrics.SessionDuration.Observe(time.Since(started).Seconds())
		c.m.Metrics.TurnsPerSession.Observe(float64(turns))
	}
	c.log.Info("browser disconnected", "reason", reason, "turns", turns,
		"duration_ms", time.Since(started).Milliseconds())
}

// readLoop handles browser messages until the connection ends.
func (c *conn) readLoop() {
	for {
		typ, data, err := c.ws.Read(c.ctx)
		if err != nil {
			c.setReason(readReason(err))
			return
		}
		if typ == websocket.MessageBinary {
			c.m.Metrics.BrowserMessages.WithLabelValues("audio").Inc()
			c.micAudio(data)
			continue
		}
		msg, derr := protocol.Decode(data, protocol.Limits{MaxTextChars: c.m.cfg.MaxTextChars})
		if derr != nil {
			c.m.Metrics.BrowserMessages.WithLabelValues("invalid").Inc()
			var de *protocol.DecodeError
			errors.As(derr, &de)
			c.send(protocol.NewError(de.Code, de.Message, false, 0))
			continue
		}
		c.m.Metrics.BrowserMessages.WithLabelValues(msg.Type).Inc()
		switch msg.Type {
		case protocol.TypeSessionStart:
			c.send(protocol.NewError(protocol.CodeBadMessage, "the session has already started", false, 0))
			c.close(protocol.CloseProtocolViolation, "session.start sent twice", "protocol_violation")
			return
		case protocol.TypeText:
			if v := c.voiceSession(); v != nil {
				v.text(msg.Text)
			} else {
				c.startTurn(msg.Text, "")
			}
		case protocol.TypeVoiceStart:
			c.startVoice("client", "")
		case protocol.TypeVoiceStop:
			if v := c.voiceSession(); v != nil {
				v.beginEnding("client")
			}
		case protocol.TypeAudioEnd:
			if v := c.voiceSession(); v != nil {
				_ = v.upstream().SendAudioEnd()
			}
		case protocol.TypeConfirm:
			c.answerConfirm(msg.Token, msg.Approve)
		case protocol.TypeTurnCancel:
			c.cancelTurn()
		case protocol.TypePing:
			c.send(protocol.Pong{Type: protocol.TypePong})
		default:
			c.send(protocol.NewError(protocol.CodeUnsupported, msg.Type+" is not available yet", false, 0))
		}
	}
}

func readReason(err error) string {
	switch websocket.CloseStatus(err) {
	case websocket.StatusNormalClosure, websocket.StatusGoingAway:
		return "client_closed"
	case websocket.StatusMessageTooBig:
		return "message_too_big"
	case -1:
		return "read_failed"
	default:
		return "client_closed"
	}
}

func (c *conn) setReason(r string) {
	c.mu.Lock()
	if c.reason == "" {
		c.reason = r
	}
	c.mu.Unlock()
}

// micAudio takes one binary frame of microphone audio (PCM16LE 16 kHz).
func (c *conn) micAudio(pcm []byte) {
	v := c.voiceSession()
	switch {
	case v == nil:
		c.send(protocol.NewError(protocol.CodeBadMessage, "audio is only accepted in voice mode", false, 0))
	case len(pcm)%2 != 0:
		c.send(protocol.NewError(protocol.CodeBadMessage, "audio frames must hold whole 16-bit samples", false, 0))
	default:
		if _, blocked := c.blocked(); !blocked {
			v.micAudio(pcm)
		}
	}
}

// takeOver closes the connection because another one resumed its session,
// and returns when it has ended, its running turn cancelled and its queued
// store writes landed (or after 2 s), so that the new connection reads
// everything the old one wrote.
func (c *conn) takeOver(ctx context.Context) {
	c.close(protocol.CloseTakenOver, "session resumed by another connection", "taken_over")
	c.cancelTurn()
	select {
	case <-c.done:
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
	}
}

// drain waits for the running turn (or ctx), then closes with 4100.
func (c *conn) drain(ctx context.Context) {
	c.turnMu.Lock()
	td := c.turnDone
	c.turnMu.Unlock()
	if td != nil {
		select {
		case <-td:
		case <-ctx.Done():
		case <-c.done:
			return
		}
	}
	c.close(protocol.CloseDraining, "server draining: reconnect and resume", "draining")
}
