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
	rec          Record
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

// handshake reads session.start and answers session.ready, or closes.
func (c *conn) handshake() bool {
	timer := time.AfterFunc(c.m.cfg.HandshakeTimeout, func() {
		c.close(protocol.CloseProtocolViolation, "no session.start in time", "handshake_timeout")
	})
	defer timer.Stop()
	typ, data, err := c.ws.Read(c.ctx)
	if err != nil {
		c.setReason(readReason(err))
		return false
	}
	msg, derr := protocol.Decode(data, protocol.Limits{MaxTextChars: c.m.cfg.MaxTextChars})
	if typ != websocket.MessageText || derr != nil || msg.Type != protocol.TypeSessionStart {
		c.m.Metrics.BrowserMessages.WithLabelValues("invalid").Inc()
		c.close(protocol.CloseProtocolViolation, "the first message must be session.start", "protocol_violation")
		return false
	}
	c.m.Metrics.BrowserMessages.WithLabelValues(msg.Type).Inc()
	timer.Stop()
	return c.start(msg)
}

func (c *conn) start(msg protocol.ClientMessage) bool {
	if ok, alive := c.checkBlock(); !alive {
		return ok
	}
	wantVoice := false
	ready := protocol.SessionReady{
		Type: protocol.TypeSessionReady, Mode: protocol.ModeText,
		RegistryVersion: c.m.Registry.Version(),
		Model:           protocol.ModelInfo{Name: c.m.cfg.ModelName, Offline: c.m.cfg.Offline},
		Notice:          c.m.offlineNote,
	}
	if msg.Resume != nil {
		rec, hist, err := c.resume(msg.Resume)
		if err == nil && c.m.claim(c.ctx, rec.ID, c) {
			// Another connection held the session on this node; now that its
			// turn has ended, read what it wrote last.
			rec, hist, err = c.resume(msg.Resume)
		}
		if errors.Is(err, ErrResumeRefused) {
			c.m.Metrics.ResumeRefused.Inc()
			c.log.Info("resume refused", "session", msg.Resume.SessionID)
			c.send(protocol.NewError(protocol.CodeResumeRefused,
				"this session cannot be resumed; start a new one", false, 0))
			c.close(protocol.CloseResumeRefused, "resume refused", "resume_refused")
			return false
		}
		if err != nil {
			return c.storeDown(err)
		}
		c.rec, c.history = rec, trimHistory(hist, c.m.cfg.HistoryMax)
		wantVoice = rec.Mode == protocol.ModeVoice
		c.rec.Mode = protocol.ModeText // until the upstream is up again
		ready.SessionID, ready.ResumeToken, ready.Resumed = rec.ID, msg.Resume.ResumeToken, true
		ready.Turn, ready.History = rec.Turn, historyItems(c.history)
		ready.PendingConfirmations = c.pendingConfirmations()
		if rec.RegistryVersion != ready.RegistryVersion {
			c.log.Warn("resumed session moves to another tool registry version",
				"session", rec.ID, "was", rec.RegistryVersion, "now", ready.RegistryVersion)
			ready.RegistryChanged = true
			c.rec.RegistryVersion = ready.RegistryVersion
			c.dirty = true // the next write rewrites the record with the new version
		}
		c.m.Metrics.SessionsStarted.WithLabelValues("resumed").Inc()
	} else {
		rec := Record{ID: newSessionID(), UserID: c.user, Mode: protocol.ModeText,
			RegistryVersion: ready.RegistryVersion, CreatedAt: time.Now()}
		ctx, cancel := context.WithTimeout(c.ctx, c.m.cfg.StoreTimeout)
		token, err := c.m.Store.Create(ctx, rec)
		cancel()
		if err != nil {
			return c.storeDown(err)
		}
		c.m.claim(c.ctx, rec.ID, c)
		c.rec = rec
		ready.SessionID, ready.ResumeToken = rec.ID, token
		c.m.Metrics.SessionsStarted.WithLabelValues("new").Inc()
	}
	c.log = c.log.With("session", c.rec.ID)
	c.send(ready)
	c.m.Metrics.SessionsActive.WithLabelValues(c.rec.Mode).Inc()
	c.log.Info("session ready", "user", c.user, "resumed", ready.Resumed, "turn", c.rec.Turn,
		"init_tokens_estimate", c.m.initTokens)
	switch {
	case wantVoice:
		c.startVoice("resume", c.rec.ResumeHandle)
	case msg.Mode == protocol.ModeVoice:
		c.startVoice("session.start", "")
	}
	return true
}

func (c *conn) resume(r *protocol.Resume) (Record, []transport.Entry, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.m.cfg.StoreTimeout)
	defer cancel()
	return c.m.Store.Resume(ctx, r.SessionID, r.ResumeToken, c.user)
}

func (c *conn) storeDown(err error) bool {
	c.log.Error("session store unavailable; refusing the session", "err", err)
	c.send(protocol.NewError(protocol.CodeStoreUnavailable,
		"session state is unavailable right now; try again shortly", true, 0))
	c.close(protocol.CloseStoreUnavailable, "state store unavailable", "store_unavailable")
	return false
}

func historyItems(h []transport.Entry) []protocol.HistoryItem {
	var out []protocol.HistoryItem
	turn := 0
	for _, e := range h {
		switch {
		case e.Role == transport.RoleUser:
			turn++
			out = append(out, protocol.HistoryItem{Role: "user", Text: e.Text, Turn: turn, Kind: e.Kind})
		case e.Role == transport.RoleModel && e.Text != "" && len(e.Calls) == 0:
			out = append(out, protocol.HistoryItem{Role: "model", Text: e.Text, Turn: turn})
		}
	}
	return out
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

// send queues one event. A queue overflow closes the connection as too
// slow (4101): the client may reconnect and resume.
func (c *conn) send(v any) {
	b, err := protocol.Encode(v)
	if err != nil {
		c.log.Error("cannot encode event", "err", err)
		return
	}
	if !c.q.push(b) {
		c.tooSlow()
	}
}

func (c *conn) tooSlow() {
	c.log.Warn("browser too slow: send queue over its bound, closing", "bound_bytes", c.m.cfg.SendQueueBytes)
	c.mu.Lock()
	c.closeNow = true
	c.mu.Unlock()
	c.close(protocol.CloseTooSlow, "too slow: reconnect and resume", "too_slow")
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

// close asks the writer to flush what is queued and close with code. The
// first call wins.
func (c *conn) close(code int, reason, metricReason string) {
	c.closeOnce.Do(func() {
		c.setReason(metricReason)
		c.closeCode, c.closeReason = websocket.StatusCode(code), protocol.CloseReason(reason)
		close(c.closing)
	})
}

// writer is the only goroutine writing to the browser.
func (c *conn) writer() {
	for {
		select {
		case <-c.q.notify:
			if !c.flush() {
				c.cancel()
				return
			}
		case <-c.closing:
			c.mu.Lock()
			now := c.closeNow
			c.mu.Unlock()
			if now {
				c.q.drop()
			} else if !c.flush() {
				c.cancel()
				return
			}
			c.closeBounded()
			c.cancel()
			return
		case <-c.ctx.Done():
			return
		}
	}
}

// closeBounded sends the close frame and waits for the browser's answer
// (which the reader receives), but no longer than the write timeout: a
// client too slow to read its socket cannot even take the close frame.
// (CloseNow cannot interrupt a Close in progress.)
func (c *conn) closeBounded() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.ws.Close(c.closeCode, c.closeReason)
	}()
	select {
	case <-done:
	case <-time.After(c.m.cfg.WriteTimeout):
		// Cancelling the reader's context makes the library drop the TCP
		// connection, which ends the stuck close handshake.
		c.cancel()
		<-done
	}
}

func (c *conn) flush() bool {
	for _, f := range c.q.take() {
		typ := websocket.MessageText
		if f.binary {
			typ = websocket.MessageBinary
		}
		ctx, cancel := context.WithTimeout(c.ctx, c.m.cfg.WriteTimeout)
		err := c.ws.Write(ctx, typ, f.data)
		cancel()
		if err != nil {
			c.setReason("write_failed")
			return false
		}
	}
	return true
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
