package session

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/stages"
	"github.com/turnstile-gw/turnstile/protocol"
)

// conn is one browser connection: the socket (read, write, ping, close),
// the send queue and its writer, liveness, the reader's rates and
// refusals, the token's expiry, and the session it carries (s, session.go),
// which reaches it only through outbound. Its goroutines: the reader (the
// caller of run) and the writer (while there is something to write), and
// the session's. They share ctx; when one fails, all stop.
type conn struct {
	// The first cache line (a conn is 640 bytes, 64-byte aligned) holds
	// what the voice path reads for every chunk, the microphone's and the
	// model's, and nothing written per chunk: the reader's own per-frame
	// state is with its rates, apart from what the pump reads
	// (TestConnKeepsThePumpsFieldsOnOneCacheLine).
	m    *Manager
	wire Wire   // the browser's WebSocket, or a phone call's bridge
	q    *queue // the send queue
	// ctx ends with the connection (cancel), which drops the socket.
	ctx *connCtx
	// The writer's own (see write): one runs at a time, started by the
	// queue (or the pump's claim of its place).
	watchdog *watchdog
	// relay are the channel's audio series: frames in, model audio out by
	// its path, the sampled time through the gateway (relaystats.go).
	relay *relaySeries

	raw net.Conn // under wire; nil when unknown
	id  Identity // as the edge admitted it (user, channel, prompt, pinned)
	// logp is the connection's logger (log, connlog.go); session.start
	// adds the session's id while the reader and timers may log.
	logp atomic.Pointer[slog.Logger]
	done latch // closed when run has returned

	// s is the session it carries (session.go), from session.start on;
	// nil before.
	s   atomic.Pointer[session]
	out closer
	// The writer's too. wend is closed when a writer has ended for good.
	spare []frame
	wend  latch

	// micFrames counts the microphone frames sent up, for the in-relay
	// sampling (micSent); the reader's own, on one cache line with the
	// microphone's pace.
	micFrames uint
	rates     rates    // the reader's limiters (rates.go)
	refusals  refusals // counted and logged (refusals.go)
	exp       expiry   // the token's deadline (expiry.go)
	// Liveness, for the node's keepalive goroutine.
	lastSeen atomic.Int64 // unix ns of the browser's last frame or pong
	pings    pinger

	// The reader's own: the last frame recorded as a sign of life (see
	// sighted), and whether the browser's socket was offered to an event
	// loop (micReads); loopKey picks the loop (affinity).
	seen      int64
	loopTried bool // decided: looped says whether the socket is on a loop
	looped    bool
	loopKey   uint64
}

// newConn is a connection whose context ends when parent does, or at its
// cancel.
func newConn(parent context.Context, m *Manager, wire Wire, id Identity) *conn {
	c := &conn{
		m: m, wire: wire, id: id,
		q:     newQueue(m.cfg.SendQueueBytes),
		relay: m.newRelayStats(id.Channel),
		rates: newRates(m.cfg),
	}
	c.loopKey = m.loopSeq.Add(1)
	c.logp.Store(connLogger(m.Log, id.ClientIP, ""))
	c.refusals.node = &m.limitLogs
	if c.refusals.counters = m.refusals[id.Channel]; c.refusals.counters == nil {
		c.refusals.counters = newLimitCounters(m.Metrics, id.Channel)
	}
	c.exp.init(m.cfg.AuthLeeway, m.cfg.Clock, c.tokenExpired)
	c.out.onClose = c.q.requestClose
	c.q.write = c.write
	c.ctx = newConnCtx(parent, c.drop)
	return c
}

// cancel ends the connection's context, and with it the connection: the
// socket is dropped (on a goroutine of its own: a close in progress may
// wait for the reader), which ends a read, a write or a close handshake
// in progress.
func (c *conn) cancel() { c.ctx.cancel() }

// log is the connection's logger: with the session's id once it started.
func (c *conn) log() *slog.Logger { return c.logp.Load() }

// readBufferSize is a browser reader's pooled buffer (see readBuf); a
// larger frame grows a buffer the connection keeps (at most
// MaxMessageBytes).
const readBufferSize = 4 << 10

// run serves the connection until it ends and leaves nothing running, then
// calls done. With fresh, once session.start is read, the connection is
// read from then on by a new goroutine and run returns: the stack the
// handshake grew would otherwise stay with the one goroutine as long as the
// session is open, idle or not, since the runtime only halves a stack at a
// collection that finds it mostly unused. The read loop at rest needs a
// few KiB; one goroutine per session either way. (The session's start —
// its JSON, its Redis round trips — runs on the conversation's goroutine,
// which ends when it is done.)
func (c *conn) run(fresh bool, done func()) {
	c.exp.arm(c.id.ExpiresAt)
	// Reads and writes run without a context of their own (a context per
	// frame costs an allocation per audio frame); ending the connection
	// (cancel) drops the socket.
	started := c.m.now()
	ok := c.handshake()
	r := &reader{started: started, done: done}
	if ok && fresh {
		go c.serve(r)
		return
	}
	if !ok {
		r.ended = true
	}
	c.serve(r)
}

// reader is what the reader's goroutine carries from one to the next (see
// serve).
type reader struct {
	started time.Time
	done    func()
	begun   bool // the session has started (afterStart), as the reader knows
	ended   bool // the handshake failed: nothing to read
}

// serve reads until the connection ends, then stops what it runs and calls
// done. When the browser has answered a ping and sent nothing else (the
// wire said errIdleRead), serve hands the reading on to a new goroutine and
// returns: reading and handling messages grew this goroutine's stack to
// 4 KiB or more, which the runtime never halves to 2 (it would need under
// a quarter of the smaller stack in use, less its 800-byte guard); the new
// one starts small and waits outside any frame-header read
// (wsbuf.ServerConn.Wait; see readOn). Once a ping interval per
// connection at most: still one goroutine a connection.
func (c *conn) serve(r *reader) {
	if !r.ended && c.readLoop(r) {
		c.shedWriter()
		go c.readOn(r)
		return
	}
	defer r.done()
	defer c.done.close()
	defer c.cancel()
	defer c.exp.stop()
	c.end(r.started)
}

// end stops what the connection runs once its reader has returned, and
// accounts for it.
func (c *conn) end(started time.Time) {
	if c.out.decided() {
		// Let the writer flush what explains the close, and send the close
		// frame, before everything stops.
		select {
		case <-c.wend.wait():
		case <-clock.Wall.After(2 * c.m.cfg.WriteTimeout):
		}
	}
	c.cancel()
	c.out.later.Wait()
	s := c.s.Load()
	ok := s != nil && s.stop() // the session started
	c.q.stopWriters()
	if s != nil {
		s.finish()
	}
	_ = c.wire.CloseNow()
	c.pings.stop()

	d := c.out.disconnect()
	var mode protocol.Mode
	turns := 0
	if s != nil {
		mode, turns = s.left(d, ok)
	}
	c.m.Metrics.Disconnected(d)
	if ok {
		c.m.Metrics.SessionEnded(d, c.id.Channel, mode, c.m.now().Sub(started), turns)
	}
	c.log().Info("browser disconnected", "channel", c.id.Channel, "reason", d.Label, "turns", turns,
		"duration_ms", c.m.now().Sub(started).Milliseconds())
}

// drop ends the network connection at once.
func (c *conn) drop() {
	if c.raw != nil {
		_ = c.raw.Close()
	}
	_ = c.wire.CloseNow()
}

// readOn is serve on a new goroutine that first waits for the next frame
// from as few and as small frames as it can (about 0.5 KiB of stack, the
// readiness wait's own included): the runtime starts a goroutine with the
// average stack in use at the last collection plus an 928-byte guard, in
// powers of two, so a node whose goroutines are mostly these waits starts
// them, and keeps them, at 2 KiB (with the wait under the read loop's and
// Read's frames, about 1 KiB, the average came to just over, and to 4).
func (c *conn) readOn(r *reader) {
	if w, ok := c.wire.(idleWaiter); ok {
		w.waitIdle()
	}
	c.serve(r)
}

// readLoop handles browser messages until the connection ends, and reports
// false; or true when the wire has nothing to read after a pong
// (errIdleRead), for serve to read on from a new goroutine.
func (c *conn) readLoop(r *reader) bool {
	var buf []byte  // a browser's wire reads into buffers of its own
	s := c.s.Load() // the handshake made it
	// How far apart signs of life are recorded (sighted, c.seen).
	grain := aliveGrain(c.m.cfg.IdleTimeout)
	for {
		binary, data, err := c.wire.Read(buf)
		if err != nil {
			if err == errIdleRead {
				return true
			}
			c.out.setReason(readReason(err))
			return false
		}
		buf = data[:0]
		now := clock.Wall.Now()
		c.sighted(now, &c.seen, grain)
		if binary {
			c.relay.audioIn.Inc()
			if !r.begun {
				// Read while session.start runs: it goes after, as read then.
				if !s.afterStart() {
					continue
				}
				r.begun, now = true, clock.Wall.Now()
			}
			c.micAudio(s, now, data)
			continue
		}
		if !utf8.Valid(data) {
			c.invalidUTF8()
			return false
		}
		if !c.allowMessage(now) {
			continue
		}
		stages.Mark(stages.Read)
		if !c.handle(s, data) {
			return false
		}
	}
}

// handshake reads session.start and hands it to a new session, whose
// goroutine (inbox.go) starts it (begin) while the reader reads on; or it closes. It reports whether the reader goes on.
func (c *conn) handshake() bool {
	timer := clock.Wall.AfterFunc(c.m.cfg.HandshakeTimeout, func() { c.close(protocol.DisconnectHandshakeTimeout) })
	defer timer.Stop()
	binary, data, err := c.wire.Read(nil)
	for err == errIdleRead { // a pong before session.start
		binary, data, err = c.wire.Read(nil)
	}
	if err != nil {
		c.out.setReason(readReason(err))
		return false
	}
	if !binary && !utf8.Valid(data) {
		c.invalidUTF8()
		return false
	}
	msg, derr := protocol.Decode(data, protocol.Limits{MaxTextChars: c.m.cfg.MaxTextChars})
	if binary || derr != nil || msg.Type != protocol.TypeSessionStart {
		c.m.Metrics.BrowserInvalid()
		why := "the first message must be session.start"
		var de *protocol.DecodeError
		if !binary && msg.Type == protocol.TypeSessionStart && errors.As(derr, &de) {
			why = de.Message // a session.start with a bad field: say which
		}
		c.send(protocol.NewError(protocol.CodeBadMessage, why, false, 0))
		c.close(protocol.DisconnectProtocolViolation)
		return false
	}
	c.m.Metrics.BrowserMessage(msg.Type)
	timer.Stop()
	// The session exists from here on: the reader reads on while its
	// goroutine starts it.
	s := newSession(c.ctx, c.m, c, &c.id)
	c.s.Store(s)
	s.open(msg)
	return true
}

// invalidUTF8 closes the connection 1007: a text frame must be UTF-8.
func (c *conn) invalidUTF8() {
	c.m.Metrics.BrowserInvalid()
	c.refused(limitInvalidUTF8, c.m.now())
	c.close(protocol.DisconnectInvalidUTF8)
}

func readReason(err error) protocol.Disconnect {
	switch websocket.CloseStatus(err) {
	case websocket.StatusMessageTooBig:
		return protocol.DisconnectMessageTooBig
	case -1:
		return protocol.DisconnectReadFailed
	default:
		return protocol.DisconnectClientClosed
	}
}
