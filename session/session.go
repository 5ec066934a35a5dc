package session

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/session/voice"
	"github.com/turnstile-gw/turnstile/timeline"
)

// session is one conversation as a connection carries it: its state and
// store writes, its start or resume, its turns (activity), confirmations,
// ownership (fence), hand-off, greeting, timeline and tools. It reaches
// the browser only through outbound and the store through its persister
// and the manager's Store; the connection (conn) keeps the socket, the
// writer, liveness and the reader's limits. Its goroutines: the
// conversation's inputs (while some wait, inbox.go), a running text turn
// or the voice side, and the store writer; they share the connection's
// ctx.
type session struct {
	m   *Manager
	out outbound
	id  *Identity // as the edge admitted it (the connection's)
	// limitKey is whose per-user limits the session counts against: the
	// user, or in dev mode a key of its own.
	limitKey string
	ctx      context.Context // the connection's: ends when it ends

	ts   *toolset    // the tools pinned at the session's start
	asks sessionAsks // what session.start asked for (context.go)
	st   *state
	pst  *persister
	// conv is the session's policy across its turns (loop history,
	// confirmations, fencing, the call ledger), opened at its first use
	// (conversation); convEpoch is the epoch it writes with, set at the
	// start.
	conv      atomic.Pointer[orchestrator.Conversation]
	convEpoch int64
	// traceLink is the browser's span (session.start traceparent) that the
	// turns' traces link to; nil: none (link). Most sessions have none.
	traceLink *trace.SpanContext
	act       activity
	in        inbox // the conversation's inputs waiting for its goroutine
	// starting is session.start being acted on, by the conversation's
	// goroutine (start.go, afterStart).
	starting sync.WaitGroup
	started  atomic.Bool // session.ready was sent

	stats *metrics.SessionStats // the session's context and tool-call figures, once ready
	// tl is the session's timeline, made at its first event once ready
	// (timeline; before started nothing is recorded).
	tl    atomic.Pointer[timeline.Recorder]
	owner ownership // the epoch it holds its session with (ownership.go)
	// connectsUntil (unix ns): the upstream-connect budget refused until
	// then; opens are refused here without asking the store.
	connectsUntil atomic.Int64
}

// outbound is the browser connection as its session reaches it: events
// and audio out, the send queue's room, the close (decided once, with a
// reason), the connection's end, its logger and its refusal counters.
// *conn is the one in production; the core tests fake it.
type outbound interface {
	send(protocol.Event)
	// sendNow is send for a text turn's events: the caller may write the
	// frame itself when nothing is queued and no writer runs.
	sendNow(protocol.Event)
	// reply queues an answer built to fit the budget it is given (a share
	// of the queue's free space).
	reply(build func(budget int) protocol.Event)
	sendAudio(pcm []byte, received time.Time) bool
	// audioWontWait: sendAudio would not wait for the browser's socket
	// (an event loop serves it).
	audioWontWait() bool
	// affinity is the connection's key for an event loop (Manager.Loops).
	affinity() uint64
	dropAudio()
	audioDrained() <-chan struct{}
	free() int // the send queue's free bytes
	// closeWith decides the close (the first call wins) and reports
	// whether this call decided it.
	closeWith(d protocol.Disconnect) bool
	closing() bool          // a close is decided
	abort()                 // end the connection at once: nothing to tell
	ended() <-chan struct{} // closed when the connection has ended
	alive(now time.Time)    // the browser was heard from (its idle clock)
	voiceOff()              // the session left voice: the browser's reader reads as in text (micReads)
	refused(l limit, now time.Time)
	log() *slog.Logger
	// named adds the session's id to the connection's logger.
	named(sessionID string)
}

// newSession is the session a new connection will carry, empty until
// session.start (start.go). ctx is the connection's.
func newSession(ctx context.Context, m *Manager, out outbound, id *Identity) *session {
	s := &session{m: m, out: out, id: id, limitKey: id.User, ctx: ctx,
		st: &state{historyMax: m.cfg.HistoryMax, historyMaxBytes: m.cfg.HistoryMaxBytes, now: m.cfg.Clock.Now}}
	s.st.trimmed = func(int) { s.refused(limitHistoryBytes, s.m.now()) }
	if id.Anonymous {
		// Dev mode: every connection is "the" anonymous user; each counts
		// as a user of its own for the per-user limits.
		s.limitKey = id.User + ":" + newSessionID()
	}
	s.act.s = s
	s.pst = &persister{st: s.st, store: m.Store, timeout: m.cfg.StoreTimeout, log: out, ctx: ctx,
		fenced: s.fence, restored: func(ctx context.Context) {
			s.m.Metrics.StoreRestorations.Inc()
			s.log().Info("session written back to a store that had lost it")
			s.m.restoreBlock(ctx, s.id.User, s.st.currentBlock())
		}}
	return s
}

// conversation is the session's policy across its turns, opened at its
// first use — a turn, a confirmation's answer, the pending ones listed at a
// resume — once the session has started, so that an idle session holds
// none (with its loop history, about 0.3 KiB). What it is opened with is
// set by the start and not changed after.
func (s *session) conversation() *orchestrator.Conversation {
	if cv := s.conv.Load(); cv != nil {
		return cv
	}
	cv := s.m.Orchestrator.Open(orchestrator.Session{ID: s.st.record().ID, UserID: s.id.User, Channel: s.id.Channel,
		Tools: s.ts.reg, Epoch: s.convEpoch, TakenOver: s.takenOver, Stats: s.stats, Log: s.log(), Claims: s.id.Claims,
		Budgets: s.asks.budgets()})
	if !s.conv.CompareAndSwap(nil, cv) {
		cv = s.conv.Load()
	}
	return cv
}

// link is the browser's span the turns' traces link to (traceLink); zero:
// none.
func (s *session) link() trace.SpanContext {
	if s.traceLink == nil {
		return trace.SpanContext{}
	}
	return *s.traceLink
}

// open takes session.start, the session's first input: the inputs read
// after it wait for it (afterStart, inbox.go).
func (s *session) open(msg protocol.ClientMessage) {
	s.starting.Add(1)
	s.enqueue(msg)
}

// voiceSide returns the voice side, nil in text mode (or before the
// session). The reader asks for every microphone frame.
func (s *session) voiceSide() *voice.Session {
	if s == nil {
		return nil
	}
	return s.act.voiceSide()
}

// inputBlocked reports whether the user's input is refused now (a block).
func (s *session) inputBlocked() bool {
	_, blocked := s.st.blocked()
	return blocked
}

// waitIdle returns when no turn is under way (a drain waits for it), or
// ctx or the connection ends.
func (s *session) waitIdle(ctx context.Context) { s.act.waitIdle(ctx, s.out.ended()) }

// left is the session's part of its connection's end, after finish: its
// close on the timeline and in the store, and its figures closed when it
// had started. It returns the session's mode and the turns it took.
func (s *session) left(d protocol.Disconnect, started bool) (protocol.Mode, int) {
	s.leave(d)
	if started {
		s.stats.Close()
	}
	return s.st.mode(), s.st.turnsTaken()
}

// The connection's side, as the session's code calls it.

func (s *session) send(ev protocol.Event)                      { s.out.send(ev) }
func (s *session) reply(build func(budget int) protocol.Event) { s.out.reply(build) }
func (s *session) close(d protocol.Disconnect)                 { s.out.closeWith(d) }
func (s *session) closing() bool                               { return s.out.closing() }
func (s *session) log() *slog.Logger                           { return s.out.log() }
func (s *session) refused(l limit, now time.Time)              { s.out.refused(l, now) }

// stop ends what the session runs, because its connection is going away:
// the inputs first (they start no turn after it), then the turn or the
// voice side. It reports whether the session had started.
func (s *session) stop() bool {
	s.waitInputs()
	ok := s.started.Load() // waitInputs: its start is over
	s.act.stop()
	return ok
}

// finish stores the session's newest state and waits for its store
// writes, once the connection's writer has stopped.
func (s *session) finish() {
	s.finalWrite()
	s.pst.finish()
}
