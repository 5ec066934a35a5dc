package session

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"go.opentelemetry.io/otel/trace"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/stages"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/timeline"
)

// conn is one browser connection and the session it carries. Its
// goroutines: the reader (the caller of run), and — while they last — the
// writer (while there is something to write), the conversation's inputs
// (while some wait, inbox.go), a running text turn or the voice side, and
// the store writer. They
// share ctx; when one fails, all stop.
type conn struct {
	m    *Manager
	wire Wire     // the browser's WebSocket, or a phone call's bridge
	raw  net.Conn // under wire; nil when unknown
	q    *queue
	// limitKey is whose per-user limits the connection counts against:
	// the user, or in dev mode a key of its own.
	limitKey string
	id       Identity // as the edge admitted it (user, channel, prompt, pinned)
	// logp is the connection's logger (log); session.start adds the
	// session's id while the reader and timers may log.
	logp atomic.Pointer[slog.Logger]

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when run has returned

	ts   *toolset    // the tools pinned at the session's start
	asks sessionAsks // what session.start asked for (context.go)
	st   *state
	pst  *persister
	// conv is the session's policy across its turns (loop history,
	// confirmations, fencing, the call ledger), once its session is known.
	conv *orchestrator.Conversation
	// traceLink is the browser's span (session.start traceparent) that the
	// turns' traces link to; zero: none.
	traceLink trace.SpanContext
	act       activity
	in        inbox // the conversation's inputs waiting for its goroutine
	// starting is session.start being acted on, by the conversation's
	// goroutine (start.go, afterStart).
	starting sync.WaitGroup
	out      closer
	// The writer's own (see write): one runs at a time, started by the
	// queue. wend is closed when a writer has ended for good.
	watchdog *watchdog
	spare    []frame
	wend     chan struct{}
	wendOnce sync.Once

	stats *metrics.SessionStats // the session's context and tool-call figures, once ready
	tl    *timeline.Recorder    // the session's timeline, once ready (nil before)
	relay relayStats            // audio frames in, and their time through the gateway (relaystats.go)

	rates    rates    // the reader's limiters (rates.go)
	refusals refusals // counted and logged (refusals.go)
	exp      expiry   // the token's deadline (expiry.go)
	// Liveness, for the node's keepalive goroutine.
	started  atomic.Bool  // session.ready was sent
	lastSeen atomic.Int64 // unix ns of the browser's last frame or pong
	pings    pinger
	owner    ownership // the epoch it holds its session with (ownership.go)
	// connectsUntil (unix ns): the upstream-connect budget refused until
	// then; opens are refused here without asking the store.
	connectsUntil atomic.Int64
}

func newConn(m *Manager, wire Wire, id Identity) *conn {
	c := &conn{
		m: m, wire: wire, id: id, limitKey: id.User,
		q:     newQueue(m.cfg.SendQueueBytes),
		done:  make(chan struct{}),
		st:    &state{historyMax: m.cfg.HistoryMax, historyMaxBytes: m.cfg.HistoryMaxBytes, now: m.cfg.Clock.Now},
		relay: newRelayStats(m.Metrics, id.Channel),
		rates: newRates(m.cfg),
	}
	c.logp.Store(m.Log)
	c.refusals.node = &m.limitLogs
	if c.refusals.counters = m.refusals[id.Channel]; c.refusals.counters == nil {
		c.refusals.counters = newLimitCounters(m.Metrics, id.Channel)
	}
	c.exp.init(m.cfg.AuthLeeway, m.cfg.Clock, c.tokenExpired)
	if id.ClientIP != "" {
		c.logp.Store(c.log().With("client_ip", id.ClientIP))
	}
	if id.Anonymous {
		// Dev mode: every connection is "the" anonymous user; each counts
		// as a user of its own for the per-user limits.
		c.limitKey = id.User + ":" + newSessionID()
	}
	c.st.trimmed = func(int) { c.refused(limitHistoryBytes, c.m.now()) }
	c.out.closing = make(chan struct{})
	c.out.onClose = c.q.requestClose
	c.wend = make(chan struct{})
	c.q.write = c.write
	c.act.c = c
	return c
}

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
	c.pst = &persister{st: c.st, store: c.m.Store, timeout: c.m.cfg.StoreTimeout, log: c.log(), ctx: c.ctx,
		fenced: c.fence, restored: func(ctx context.Context) {
			c.m.Metrics.StoreRestorations.Inc()
			c.log().Info("session written back to a store that had lost it")
			c.m.restoreBlock(ctx, c.id.User, c.st.currentBlock())
		}}
	c.exp.arm(c.id.ExpiresAt)
	// Reads and writes run without a context of their own (a context per
	// frame costs an allocation per audio frame); ending the connection
	// drops the socket, which ends a read, a write or a close handshake in
	// progress.
	stopRead := context.AfterFunc(c.ctx, c.drop)
	started := c.m.now()
	ok := c.handshake()
	serve := func() {
		defer done()
		defer close(c.done)
		defer c.cancel()
		defer c.exp.stop()
		defer stopRead()
		if ok {
			c.readLoop()
		}
		c.end(started)
	}
	if ok && fresh {
		go serve()
		return
	}
	serve()
}

// end stops what the connection runs once its reader has returned, and
// accounts for it.
func (c *conn) end(started time.Time) {
	select {
	case <-c.out.closing:
		// Let the writer flush what explains the close, and send the close
		// frame, before everything stops.
		select {
		case <-c.wend:
		case <-clock.Wall.After(2 * c.m.cfg.WriteTimeout):
		}
	default:
	}
	c.cancel()
	c.out.later.Wait()
	c.waitInputs()         // before stop: the inputs start no turn after it
	ok := c.started.Load() // the session started (waitInputs: its start is over)
	c.act.stop()
	c.q.stopWriters()
	c.finalWrite()
	c.pst.finish()
	_ = c.wire.CloseNow()
	c.pings.stop()

	d := c.out.disconnect()
	c.leave(d)
	mode, turns := c.st.mode(), c.st.turnsTaken()
	c.m.Metrics.Disconnected(d)
	if ok {
		c.stats.Close()
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

// readLoop handles browser messages until the connection ends.
func (c *conn) readLoop() {
	var buf []byte // a browser's wire reads into buffers of its own
	begun := false // the session has started (afterStart), as the reader knows
	for {
		binary, data, err := c.wire.Read(buf)
		if err != nil {
			c.out.setReason(readReason(err))
			return
		}
		buf = data[:0]
		now := clock.Wall.Now()
		c.alive(now)
		if binary {
			c.relay.audioIn.Inc()
			if !begun {
				// Read while session.start runs: it goes after, as read then.
				if !c.afterStart() {
					continue
				}
				begun, now = true, clock.Wall.Now()
			}
			c.micAudio(now, data)
			continue
		}
		if !utf8.Valid(data) {
			c.invalidUTF8()
			return
		}
		if !c.allowMessage(now) {
			continue
		}
		stages.Mark(stages.Read)
		if !c.handle(data) {
			return
		}
	}
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
