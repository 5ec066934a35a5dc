// Package session runs one live session per browser connection. The
// connection (conn, conn.go) is the socket: its reader, a writer draining
// a byte-bounded send queue, liveness, the reader's rates and refusals and
// the token's expiry. The session it carries (session, session.go), made
// when session.start is read, is the conversation: its inputs' goroutine,
// its state and the ordered writes that keep it in the store, the start
// and resume, confirmations, ownership and blocks, and the switch between
// the text loop (session/textturn) and the voice side (session/voice); it
// reaches the connection only through the outbound interface, and the
// loops reach it through small interfaces (host.go). It has no policy
// rules of its own: those are the orchestrator's, one
// orchestrator.Conversation per session.
package session

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"github.com/turnstile-gw/turnstile/internal/evloop"
	"github.com/turnstile-gw/turnstile/internal/throttle"
	"github.com/turnstile-gw/turnstile/internal/wsbuf"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tracing"
	"github.com/turnstile-gw/turnstile/transport"
)

// Deps are the parts a session talks to.
type Deps struct {
	Store        store.Store
	Model        transport.TextModel
	Live         transport.LiveModel // nil: voice is not available
	Orchestrator *orchestrator.Orchestrator
	// Tools gives the current tool registry; a session pins the one that
	// is current when it starts (*tools.Catalog is one, tools.Fixed
	// another).
	Tools ToolSource
	// Auth verifies the fresh tokens of auth messages; nil in dev mode
	// (the connection does not expire, auth is answered as it is).
	Auth    TokenVerifier
	Metrics *metrics.Metrics
	Log     *slog.Logger
	// Tracing makes each turn's trace; nil: tracing is off.
	Tracing *tracing.Provider
	// Desk hears of every hand-off to a person (handoff.go); nil: only
	// the browser, the timeline and the event stream do.
	Desk HandoffDesk
	// Loops, when set, serve a voice session's browser socket (plain TCP)
	// from an event loop once its microphone streams (internal/evloop,
	// Linux), the same loop as its model connection (Affinity): see
	// micReads. Live's adapter is given the same pool.
	Loops *evloop.Pool
}

// Manager runs sessions and knows which are live on this node, so that a
// resume elsewhere on the node takes the session over and a drain reaches
// every connection.
type Manager struct {
	cfg Config
	Deps

	offlineNote string

	refusals map[metrics.Channel]*limitCounters // by channel, every one of metrics.Channels
	relays   map[metrics.Channel]*relaySeries   // likewise
	// limitLogs throttles the log lines of the limits a client meets by
	// reconnecting in a loop: one a minute per reason on this node.
	limitLogs throttle.Keyed

	mu       sync.Mutex
	toolsets map[string]*toolset // by registry version, the newest few
	live     map[string]*session // by session id
	recent   *recentSessions     // sessions served here lately, not live
	all      map[*conn]struct{}
	starting map[string]*resuming // session ids being resumed on this node
	draining bool
	onCheck  []func() // OnStoreCheck's hooks
	// lostAt is when this node last learned that Redis lost its data
	// (unix ns; 0: never), see restoring.
	lostAt   atomic.Int64
	pinger   chan struct{} // closed to stop the keepalive goroutine; nil when none runs
	liveKick chan struct{} // wakes the presence loop: a session started here
	liveNew  []string      // sessions started here since the presence loop last woke
	liveAll  bool          // too many for liveNew: the loop renews every session
	loopSeq  atomic.Uint64 // the connections' event-loop keys (conn.affinity)
	wg       sync.WaitGroup
}

// ToolSource gives the tool registry that is current now.
type ToolSource interface {
	Current() *tools.Registry
}

// NewManager prepares a manager; it starts nothing.
func NewManager(cfg Config, d Deps) *Manager {
	cfg.defaults()
	m := &Manager{cfg: cfg, Deps: d, live: map[string]*session{}, all: map[*conn]struct{}{},
		toolsets: map[string]*toolset{}, starting: map[string]*resuming{}, liveKick: make(chan struct{}, 1),
		recent: newRecentSessions(cfg.RecentSessionsBytes, cfg.IdleTimeout, cfg.Clock.Now)}
	m.refusals = make(map[metrics.Channel]*limitCounters, len(metrics.Channels))
	m.relays = make(map[metrics.Channel]*relaySeries, len(metrics.Channels))
	for _, ch := range metrics.Channels {
		m.refusals[ch] = newLimitCounters(d.Metrics, ch)
		m.relays[ch] = newRelaySeries(d.Metrics, ch)
	}
	m.currentToolset()
	d.Metrics.Summary.SetLoopState(m.loopState)
	if cfg.Offline {
		m.offlineNote = "offline demo model: answers come from a rule-based fake that reads the knowledge base, " +
			"not from a real model"
	}
	return m
}

// Node is this node's name in the store (the live index, timelines).
func (m *Manager) Node() string { return m.cfg.Node }

// InitTokens is the estimated size, in tokens, of what every text session
// sends before the conversation (system instruction plus tool declarations).
func (m *Manager) InitTokens() int { return m.currentToolset().text.tokens }

// Active returns the number of live connections on this node.
func (m *Manager) Active() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.all)
}

// Serve runs one accepted browser WebSocket (wsbuf.Accept) until it
// ends, and closes it.
func (m *Manager) Serve(ctx context.Context, ws *wsbuf.ServerConn, id Identity) {
	wire, pings := newBrowserWire(ws, int64(m.cfg.MaxMessageBytes))
	m.serve(ctx, wire, nil, id, pings) // the wire's CloseNow closes the socket (see browserWire)
}

// ServeWire runs one connection on any Wire until it ends (a phone call's
// bridge is one), and closes it. A draining node refuses it (4100).
func (m *Manager) ServeWire(ctx context.Context, wire Wire, raw net.Conn, id Identity) {
	m.serve(ctx, wire, raw, id, nil)
}

// Start is Serve on a goroutine of its own: it returns once the
// connection is registered (or refused, the node draining), and calls
// ended when the connection has ended. The caller — the HTTP handler that
// upgraded it — can then return, and the HTTP server's goroutine and what
// it holds (its stack, the request, its buffers) are freed while the
// session stays open: an idle session keeps one goroutine, not two.
func (m *Manager) Start(ctx context.Context, ws *wsbuf.ServerConn, id Identity, ended func()) {
	wire, pings := newBrowserWire(ws, int64(m.cfg.MaxMessageBytes))
	c := m.admit(ctx, wire, nil, id, pings) // as in Serve
	if c == nil {
		ended()
		return
	}
	go m.runConn(c, true, ended)
}

// serve is ServeWire; pings, when not nil, is the wire's ping gate, bound
// to the connection's message rate before its reader starts.
func (m *Manager) serve(ctx context.Context, wire Wire, raw net.Conn, id Identity, pings *readerHooks) {
	if c := m.admit(ctx, wire, raw, id, pings); c != nil {
		m.runConn(c, false, func() {})
	}
}

// admit registers a new connection; nil when the node is draining (the
// wire is then closed 4100). The connection's context exists before it is
// registered: a drain may close it (and start its writer) before it runs.
func (m *Manager) admit(ctx context.Context, wire Wire, raw net.Conn, id Identity, pings *readerHooks) *conn {
	if id.Channel == "" {
		id.Channel = ChannelBrowser
	}
	m.mu.Lock()
	if m.draining {
		m.mu.Unlock()
		m.Metrics.Disconnected(protocol.DisconnectDraining)
		m.Metrics.RefuseSession("draining", id.Channel)
		_ = wire.Close(protocol.DisconnectDraining.Code, protocol.DisconnectDraining.Reason)
		return nil
	}
	c := newConn(ctx, m, wire, id)
	c.raw = raw
	if pings != nil {
		pings.allow = c.allowMessage
	}
	m.all[c] = struct{}{}
	m.startKeepaliveLocked()
	m.wg.Add(1)
	m.mu.Unlock()
	return c
}

// runConn runs an admitted connection until it ends, forgets it, and calls
// ended; with fresh, a started session is served on a goroutine of its own
// (see conn.run) and runConn returns before it ends.
func (m *Manager) runConn(c *conn, fresh bool, ended func()) {
	c.run(fresh, func() {
		defer ended()
		defer m.wg.Done()
		m.forget(c)
	})
}

// forget drops an ended connection from the node's tables, keeping a
// session it held for a resume.
func (m *Manager) forget(c *conn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.all, c)
	if s := c.s.Load(); s != nil {
		m.forgetLocked(s)
	}
	if len(m.all) == 0 && m.pinger != nil {
		close(m.pinger)
		m.pinger = nil
	}
}

// forgetLocked drops an ended session from the live table, keeping a copy
// for a resume when it still owned its session. m.mu is held.
func (m *Manager) forgetLocked(s *session) {
	id := s.st.record().ID
	if m.live[id] != s {
		return
	}
	delete(m.live, id)
	if s.owner.current() {
		rec, _, pending, _ := s.st.snapshot()
		hist, sizes := s.st.historyAndSizes()
		m.recent.keep(rec, hist, sizes, pending, s.st.currentBlock())
	}
}

// Draining reports whether the node is draining: new connections are
// refused.
func (m *Manager) Draining() bool { return m.isDraining() }

// Watch follows the store for this node until ctx ends: a resume on any
// node closes the connection that held the session here (4005), an
// operator's close ends it (4009), and when Redis answers again, or has
// lost its data, every live session is checked and written back whole
// where needed. It also keeps this node's sessions in the live index. Run
// it once per node.
func (m *Manager) Watch(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); m.presence(ctx) }()
	defer func() { cancel(); <-done }()
	return m.Store.Watch(ctx, m.cfg.Node, watcher{m})
}

// isDraining reports whether the node is draining.
func (m *Manager) isDraining() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.draining
}

// resuming is a resume of a session in progress on this node: the
// connection taking it over, and what the next resume waits on.
type resuming struct {
	s    *session
	done chan struct{}
}

// lockSession keeps other resumes of the session on this node waiting
// until unlock, so that they take the session over one after the other; ok
// is false when ctx ended first. While it holds the lock, c hears the
// session's owner announcements (see holders).
func (m *Manager) lockSession(ctx context.Context, id string, s *session) (unlock func(), ok bool) {
	for {
		m.mu.Lock()
		busy, waiting := m.starting[id]
		if !waiting {
			r := &resuming{s: s, done: make(chan struct{})}
			m.starting[id] = r
			m.mu.Unlock()
			return func() {
				m.mu.Lock()
				delete(m.starting, id)
				m.mu.Unlock()
				close(r.done)
			}, true
		}
		m.mu.Unlock()
		select {
		case <-busy.done:
		case <-ctx.Done():
			return nil, false
		}
	}
}

// holders are the connections of a session on this node that an owner
// announcement concerns: the live one, and one resuming it. An epoch
// announced while a resume waits for the store's answer (another node
// resumed the session just after it) must reach that resume too: it is
// not the live connection yet, and would otherwise never hear that it
// lost.
func (m *Manager) holders(id string) []*session {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*session
	if s := m.live[id]; s != nil {
		out = append(out, s)
	}
	if r := m.starting[id]; r != nil && r.s != m.live[id] {
		out = append(out, r.s)
	}
	return out
}

// holder is the live connection of a session on this node, or nil.
func (m *Manager) holder(id string) *session {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live[id]
}

// claim makes c the live connection of its session. An older connection of
// the same session on this node is closed (4005) and waited for, so that
// its last writes land before c reads the session; claim reports whether
// there was one.
func (m *Manager) claim(id string, s *session) bool {
	m.mu.Lock()
	old := m.live[id]
	m.live[id] = s
	m.mu.Unlock()
	if old == nil || old == s {
		return false
	}
	old.takeOver(s.ctx)
	return true
}

// Drain lets running turns finish (a voice turn plays out to its end), then
// closes every connection with 4100 (reconnect and resume), and waits for
// them until ctx ends. Pinned connections (phone calls) are kept until they
// end or ctx's deadline nears (see conn.drain). New connections are refused
// from the first moment.
func (m *Manager) Drain(ctx context.Context) {
	m.mu.Lock()
	m.draining = true
	conns := make([]*conn, 0, len(m.all))
	for c := range m.all {
		conns = append(conns, c)
	}
	m.mu.Unlock()
	for _, c := range conns {
		go c.drain(ctx)
	}
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		m.mu.Lock()
		for c := range m.all {
			c.cancel()
		}
		m.mu.Unlock()
		<-done
	}
}

// voicePrompt is added to the base prompt for audio models.
const voicePrompt = "You are speaking with the user by voice. Answer in short spoken sentences, without " +
	"lists, markup or symbols, and never read tool output or identifiers aloud verbatim."

func newSessionID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "s_" + base64.RawURLEncoding.EncodeToString(b)
}
