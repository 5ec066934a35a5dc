package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/logtest"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/internal/wsbuf"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/session"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/tools"
)

// idleNode is a session manager behind an HTTP server that accepts as the
// gateway's edge does (wsbuf.Accept); ended gets a value as each
// connection ends.
type idleNode struct {
	url   string
	mgr   *session.Manager
	st    *store.RedisStore
	ended chan struct{}
	log   *logtest.Buffer // the node's log lines (JSON)
}

func newIdleNode(t *testing.T, cfg session.Config, expires time.Time) *idleNode {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb, err := store.NewRedisClient("redis://"+mr.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	reg, err := tools.Combine()
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(prometheus.NewRegistry(), metrics.Build{Version: "test"})
	lines := &logtest.Buffer{}
	log := slog.New(slog.NewJSONHandler(lines, nil))
	st := store.NewRedisStore(rdb, store.RedisStoreOptions{})
	n := &idleNode{st: st, ended: make(chan struct{}, 16), log: lines}
	n.mgr = session.NewManager(cfg, session.Deps{Store: st,
		Orchestrator: orchestrator.NewWith(orchestrator.Config{}, orchestrator.Deps{Registry: reg, Metrics: m, Log: log,
			Ledger: st, Confirms: st}),
		Tools: fixedTools{reg}, Metrics: m, Log: log})
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := wsbuf.Accept(w, r, wsbuf.AcceptOptions{Subprotocols: []string{protocol.Subprotocol}})
		if err != nil {
			return
		}
		n.mgr.Start(context.WithoutCancel(r.Context()), ws,
			session.Identity{User: "u", Anonymous: true, ExpiresAt: expires, ClientIP: "192.0.2.7"},
			func() { n.ended <- struct{}{} })
	}))
	t.Cleanup(gw.Close)
	n.url = "ws" + strings.TrimPrefix(gw.URL, "http")
	return n
}

// idleClient is a browser that has started its session: it reads on (and
// so answers the gateway's pings while answer holds) and hands over what
// it reads.
type idleClient struct {
	ws     *websocket.Conn
	id     string // the session's, from session.ready
	answer atomic.Bool
	events chan idleEvent // each event read
	err    chan error     // what ended the reading
}

type idleEvent struct{ Type, SessionID string }

func (n *idleNode) open(t *testing.T) *idleClient {
	t.Helper()
	c := &idleClient{events: make(chan idleEvent, 64), err: make(chan error, 1)}
	c.answer.Store(true)
	ws, _, err := websocket.Dial(context.Background(), n.url, &websocket.DialOptions{
		Subprotocols:   []string{protocol.Subprotocol},
		OnPingReceived: func(context.Context, []byte) bool { return c.answer.Load() }})
	if err != nil {
		t.Fatal(err)
	}
	c.ws = ws
	t.Cleanup(func() { _ = ws.CloseNow() })
	if err := ws.Write(context.Background(), websocket.MessageText, []byte(`{"type":"session.start"}`)); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			_, data, err := ws.Read(context.Background())
			if err != nil {
				c.err <- err
				return
			}
			var ev idleEvent
			if json.Unmarshal(data, &ev) == nil {
				select {
				case c.events <- ev:
				default:
				}
			}
		}
	}()
	c.id = c.next(t, protocol.TypeSessionReady).SessionID
	return c
}

// next waits for an event of type typ, skipping others.
func (c *idleClient) next(t *testing.T, typ string) idleEvent {
	t.Helper()
	for {
		select {
		case got := <-c.events:
			if got.Type == typ {
				return got
			}
		case err := <-c.err:
			t.Fatalf("the connection ended waiting for %s: %v", typ, err)
		}
	}
}

// sessionGoroutines are the goroutines the session package started for
// its connections (not the node's one keepalive goroutine), each as
// runtime.Stack prints it.
func sessionGoroutines() []string {
	var gs []string
	for _, g := range testwait.Stacks() {
		if strings.Contains(g, "created by github.com/turnstile-gw/turnstile/session.") &&
			!strings.Contains(g, "session.(*Manager).startKeepaliveLocked") {
			gs = append(gs, g)
		}
	}
	return gs
}

// waitOutsideLibrary waits until the node's n session goroutines are n
// readers waiting for the socket in wsbuf's Idle.Wait straight from the
// goroutine's first function (readOn), none of them inside coder/websocket
// or the read loop: the shallow stack that lets them start at 2 KiB.
func waitOutsideLibrary(t *testing.T, n int) {
	t.Helper()
	var gs []string
	if testwait.Poll(func() error {
		gs = sessionGoroutines()
		parked := 0
		for _, g := range gs {
			if strings.Contains(g, "wsbuf.(*ServerConn).Wait(") && strings.Contains(g, "session.(*conn).readOn(") &&
				!strings.Contains(g, "coder/websocket") && !strings.Contains(g, "session.(*conn).readLoop(") {
				parked++
			}
		}
		if len(gs) != n || parked != n {
			return fmt.Errorf("%d goroutines of the session package, %d waiting outside the library", len(gs), parked)
		}
		return nil
	}) != nil {
		t.Fatalf("%d idle sessions that answered a ping do not wait outside the WebSocket library:\n%s", n,
			strings.Join(gs, "\n\n"))
	}
}

// An idle session — session.start, session.ready, then nothing — holds one
// goroutine of its own: its reader. The HTTP handler that upgraded it has
// returned (Manager.Start) and no writer waits while nothing is queued.
func TestIdleSessionHoldsOneGoroutine(t *testing.T) {
	node := newIdleNode(t, session.Config{}, time.Time{})
	const n = 8
	var clients []*idleClient
	for range n {
		clients = append(clients, node.open(t))
	}
	// Goroutines the session package started (the sessions, their
	// writers, turns, store writers, keepalive): one per session, the
	// reader. (Others come and go: miniredis serves each new connection.)
	var gs []string
	if testwait.Poll(func() error {
		if gs = sessionGoroutines(); len(gs) != n {
			return fmt.Errorf("%d goroutines of the session package", len(gs))
		}
		return nil
	}) != nil {
		t.Fatalf("%d idle sessions do not hold one goroutine each:\n%s", n, strings.Join(gs, "\n\n"))
	}
	for _, c := range clients {
		_ = c.ws.CloseNow()
	}
	for range n {
		<-node.ended
	}
}

// Once an idle browser has answered a ping, its session's one goroutine
// waits for the next frame outside the WebSocket library, on a stack of
// its own (a reader parked inside the library's header read keeps the
// 4 KiB stack it grew there); the session still answers what comes next.
func TestIdleReaderWaitsOutsideTheLibraryAfterAPong(t *testing.T) {
	node := newIdleNode(t, session.Config{Limits: session.Limits{PingInterval: 20 * time.Millisecond,
		IdleTimeout: time.Hour}}, time.Time{})
	const n = 4
	var clients []*idleClient
	for range n {
		clients = append(clients, node.open(t))
	}
	for round := range 2 {
		waitOutsideLibrary(t, n)
		for i, c := range clients {
			if err := c.ws.Write(context.Background(), websocket.MessageText, []byte(`{"type":"ping"}`)); err != nil {
				t.Fatalf("round %d, session %d: %v", round, i, err)
			}
			c.next(t, protocol.TypePong)
		}
	}
	for _, c := range clients {
		_ = c.ws.CloseNow()
	}
	for range n {
		<-node.ended
	}
}

// A reader waiting outside the library still ends with its connection,
// whichever way that ends: the browser's close, the idle timeout, the
// token's expiry, the node's drain.
func TestIdleReaderWaitEndsWithTheConnection(t *testing.T) {
	for _, tc := range []struct {
		name string
		code websocket.StatusCode // what the browser is told; 0: it closed itself
		end  func(*idleNode, *idleClient, *clock.Fake)
	}{
		{"browser closes", 0, func(_ *idleNode, c *idleClient, _ *clock.Fake) {
			_ = c.ws.Close(websocket.StatusNormalClosure, "bye")
		}},
		{"idle timeout", websocket.StatusCode(protocol.DisconnectIdle.Code), func(_ *idleNode, c *idleClient, _ *clock.Fake) {
			c.answer.Store(false) // a browser gone away: no more pongs
		}},
		{"token expires", websocket.StatusCode(protocol.DisconnectTokenExpired.Code),
			func(_ *idleNode, _ *idleClient, clk *clock.Fake) { clk.Advance(2 * time.Hour) }},
		{"node drains", websocket.StatusCode(protocol.DisconnectDraining.Code), func(n *idleNode, _ *idleClient, _ *clock.Fake) {
			go n.mgr.Drain(context.Background())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(time.Now())
			node := newIdleNode(t, session.Config{Clock: clk, Limits: session.Limits{
				PingInterval: 20 * time.Millisecond, IdleTimeout: 300 * time.Millisecond}}, clk.Now().Add(time.Hour))
			c := node.open(t)
			waitOutsideLibrary(t, 1)
			tc.end(node, c, clk)
			<-node.ended
			err := <-c.err
			if tc.code != 0 && websocket.CloseStatus(err) != tc.code {
				t.Fatalf("the browser read %v, want close %d", err, tc.code)
			}
		})
	}
}

// An idle session opens neither the orchestrator's conversation (its
// policy and loop history) nor its timeline recorder: both come at the
// first use. Its close is still on its timeline.
func TestIdleSessionOpensNoConversationNorTimeline(t *testing.T) {
	node := newIdleNode(t, session.Config{Limits: session.Limits{MessageRate: 50, MessageBurst: 10}}, time.Time{})
	const n = 3
	var clients []*idleClient
	for range n {
		c := node.open(t)
		// A ping answered: what an idle browser's session does.
		if err := c.ws.Write(context.Background(), websocket.MessageText, []byte(`{"type":"ping"}`)); err != nil {
			t.Fatal(err)
		}
		c.next(t, protocol.TypePong)
		clients = append(clients, c)
	}
	if h := node.mgr.HeldParts(); h.Conversations != 0 || h.Timelines != 0 {
		t.Fatalf("%d idle sessions hold %d conversations and %d timeline recorders, want none", n, h.Conversations,
			h.Timelines)
	}
	// Nor channels nobody waits on (their end, their close, their writer's
	// end: 0.1 KiB each), nor a copy of the node's log handler with their
	// attributes formatted in advance (0.25 KiB).
	if h := node.mgr.HeldParts(); h.Signals != 0 || h.LogCopies != 0 {
		t.Fatalf("%d idle sessions hold %d channels and %d copies of the log handler, want none", n, h.Signals,
			h.LogCopies)
	}
	// Nor a message rate limiter while no message came after session.start.
	quiet := node.open(t)
	if h := node.mgr.HeldParts(); h.Limiters != n {
		t.Fatalf("%d sessions that sent a message and one that did not hold %d rate limiters, want %d", n+1,
			h.Limiters, n)
	}
	clients = append(clients, quiet)
	for _, c := range clients {
		_ = c.ws.Close(websocket.StatusNormalClosure, "")
	}
	for range clients {
		<-node.ended
	}
	for _, c := range clients {
		tl, err := node.st.Timeline(context.Background(), c.id)
		if err != nil {
			t.Fatal(err)
		}
		if len(tl.Entries) == 0 || !strings.Contains(tl.Entries[len(tl.Entries)-1], `"event":"close"`) {
			t.Fatalf("session %s's timeline after its close: %q, want the close last", c.id, tl.Entries)
		}
		// Its lines still say whose they are, as With wrote them.
		want := `"client_ip":"192.0.2.7","session":"` + c.id + `"`
		found := false
		for _, line := range strings.Split(node.log.String(), "\n") {
			if strings.Contains(line, `"msg":"browser disconnected"`) && strings.Contains(line, want) {
				found = true
			}
		}
		if !found {
			t.Fatalf("no line \"browser disconnected\" with %s in the log:\n%s", want, node.log.String())
		}
	}
}

// Once its browser has gone idle (a WebSocket pong and nothing behind it),
// a session holds none of its writer's parts — the write watchdog with its
// timer, the send queue's frame slices — and gets them back at its next
// write: a message after the idle spell still gets its answer, again and
// again.
func TestIdleSessionShedsItsWriterAndStillAnswers(t *testing.T) {
	node := newIdleNode(t, session.Config{Limits: session.Limits{PingInterval: 20 * time.Millisecond,
		IdleTimeout: time.Hour}}, time.Time{})
	const n = 3
	var clients []*idleClient
	for range n {
		clients = append(clients, node.open(t))
	}
	for round := range 3 {
		var h session.Held
		if testwait.Poll(func() error {
			if h = node.mgr.HeldParts(); h.WriterParts != 0 {
				return fmt.Errorf("%d sessions hold their writer's parts", h.WriterParts)
			}
			return nil
		}) != nil {
			t.Fatalf("round %d: %d of %d idle sessions still hold their writer's parts", round, h.WriterParts, n)
		}
		for i, c := range clients {
			if err := c.ws.Write(context.Background(), websocket.MessageText, []byte(`{"type":"ping"}`)); err != nil {
				t.Fatalf("round %d, session %d: %v", round, i, err)
			}
			c.next(t, protocol.TypePong)
		}
	}
	for _, c := range clients {
		_ = c.ws.Close(websocket.StatusNormalClosure, "")
	}
	for range n {
		<-node.ended
	}
}
