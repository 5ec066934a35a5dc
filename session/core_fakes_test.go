package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/session"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/transport"
)

// The session's core — start and resume, the text turn (activity), the
// store writes (persist) and confirmations — driven through its one
// entrance, Manager.ServeWire, by a scripted model over an in-memory wire,
// with the real RedisStore on miniredis. The end-to-end tests (cmd/gateway)
// run the same behaviours through a whole gateway.

// pipeWire is the session's end of an in-memory connection; the test holds
// the other (fakeClient).
type pipeWire struct {
	in     chan []byte // client → session (JSON frames)
	out    chan []byte // session → client
	closed chan struct{}
	once   sync.Once
	code   atomic.Int64 // the close code the session sent (0: none)
}

func newPipeWire() *pipeWire {
	return &pipeWire{in: make(chan []byte, 16), out: make(chan []byte, 256), closed: make(chan struct{})}
}

func (w *pipeWire) Read([]byte) (bool, []byte, error) {
	select {
	case data := <-w.in:
		return false, data, nil
	case <-w.closed:
		return false, nil, websocket.CloseError{Code: websocket.StatusNormalClosure}
	}
}

func (w *pipeWire) Write(binary bool, data []byte) error {
	if binary {
		return nil // no audio in these tests
	}
	select {
	case w.out <- slices.Clone(data):
		return nil
	case <-w.closed:
		return io.ErrClosedPipe
	}
}

func (w *pipeWire) Close(code int, _ string) error {
	w.code.CompareAndSwap(0, int64(code))
	return w.CloseNow()
}

func (w *pipeWire) CloseNow() error {
	w.once.Do(func() { close(w.closed) })
	return nil
}

func (w *pipeWire) Ping(context.Context) error { return nil }

// event is a server event as the browser reads it.
type event struct {
	Type, Code, Text, Token, Tool, Outcome, Reason, Kind string
	SessionID, ResumeToken                               string
	Turn                                                 int
	Resumed                                              bool
	History                                              []struct{ Role, Text, Kind string }
	PendingConfirmations                                 []struct{ Token, Tool string }
}

// fakeClient is the browser's end of a pipeWire, or what reads a
// session's Outbox (w nil: it sends nothing).
type fakeClient struct {
	t      *testing.T
	w      *pipeWire
	events <-chan []byte // what the browser is sent
	seen   []event
}

func (c *fakeClient) send(msg map[string]any) {
	c.t.Helper()
	b, err := json.Marshal(msg)
	if err != nil {
		c.t.Fatal(err)
	}
	select {
	case c.w.in <- b:
	case <-c.w.closed:
		c.t.Fatalf("send %s: the connection is closed", b)
	}
}

// next reads events until one of type typ, and returns it.
func (c *fakeClient) next(typ string) event {
	c.t.Helper()
	deadline := time.NewTimer(testwait.Timeout)
	defer deadline.Stop()
	for {
		select {
		case b := <-c.events:
			var ev event
			if err := json.Unmarshal(b, &ev); err != nil {
				c.t.Fatalf("event %s: %v", b, err)
			}
			c.seen = append(c.seen, ev)
			if ev.Type == typ {
				return ev
			}
		case <-deadline.C:
			c.t.Fatalf("no %s event; saw %+v", typ, c.seen)
		}
	}
}

// script is a text model answering each request with the next step.
type script struct {
	mu    sync.Mutex
	steps []func(transport.TextRequest) []transport.Chunk
	reqs  []transport.TextRequest
	// hold, when not nil, keeps every answer back until it is closed.
	hold chan struct{}
}

func (s *script) Stream(ctx context.Context, req transport.TextRequest) iter.Seq2[transport.Chunk, error] {
	s.mu.Lock()
	req.History = slices.Clone(req.History)
	s.reqs = append(s.reqs, req)
	chunks := []transport.Chunk{{Text: "(script over)"}}
	if n := len(s.reqs); n <= len(s.steps) {
		chunks = s.steps[n-1](req)
	}
	hold := s.hold
	s.mu.Unlock()
	return func(yield func(transport.Chunk, error) bool) {
		if hold != nil {
			select {
			case <-hold:
			case <-ctx.Done():
				yield(transport.Chunk{}, ctx.Err())
				return
			}
		}
		for i, ch := range chunks {
			if i == len(chunks)-1 {
				ch.FinishReason = "STOP"
			}
			if !yield(ch, nil) {
				return
			}
		}
	}
}

func (s *script) requests() []transport.TextRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

func say(text string) func(transport.TextRequest) []transport.Chunk {
	return func(transport.TextRequest) []transport.Chunk { return []transport.Chunk{{Text: text}} }
}

func callTool(id, name string, args map[string]any) func(transport.TextRequest) []transport.Chunk {
	return func(transport.TextRequest) []transport.Chunk {
		return []transport.Chunk{{Calls: []transport.FunctionCall{{ID: id, Name: name, Args: args}}}}
	}
}

// core is a manager over miniredis with a scripted model and one tool,
// transfer, that needs the user's approval.
type core struct {
	t         *testing.T
	mgr       *session.Manager
	model     *script
	transfers atomic.Int64 // how often transfer ran
	store     *stallingStore
	log       *slog.Logger
	wg        sync.WaitGroup
}

func newCore(t *testing.T, steps ...func(transport.TextRequest) []transport.Chunk) *core {
	t.Helper()
	return newCoreWith(t, session.Config{}, steps...)
}

// newCoreWith is newCore whose manager runs with cfg.
func newCoreWith(t *testing.T, cfg session.Config, steps ...func(transport.TextRequest) []transport.Chunk) *core {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb, err := store.NewRedisClient("redis://"+mr.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	c := &core{t: t, model: &script{steps: steps}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	transfer, err := tools.NewTool(tools.Spec{Manifest: tools.Manifest{Name: "transfer", Category: tools.CategoryAction,
		Modes: []protocol.Mode{"text", "voice"}, RequiresConfirmation: true, Description: "Moves money.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"}},"required":["to"]}`),
		Redact:     tools.Redact{Args: []string{"to"}, Result: []string{}}},
		Handler: tools.HandlerFunc(func(context.Context, tools.Call) tools.Envelope {
			c.transfers.Add(1)
			return tools.OK("sent")
		})})
	if err != nil {
		t.Fatal(err)
	}
	handOver, err := tools.NewTool(tools.Spec{Manifest: tools.Manifest{Name: "hand_over", Category: tools.CategoryAction,
		Modes: []protocol.Mode{"text", "voice"}, Description: "Hands the conversation to a person.",
		Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
		Handler: tools.HandlerFunc(func(context.Context, tools.Call) tools.Envelope {
			return tools.OK("handed over", intents.Intent{Type: intents.HandOff, Reason: "asked for a person"})
		})})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.Combine([]*tools.Tool{transfer, handOver})
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(prometheus.NewRegistry(), metrics.Build{Version: "test"})
	log := c.log
	st := store.NewRedisStore(rdb, store.RedisStoreOptions{})
	c.store = &stallingStore{Store: st}
	c.mgr = session.NewManager(cfg, session.Deps{Store: c.store, Model: c.model,
		Orchestrator: orchestrator.NewWith(orchestrator.Config{}, orchestrator.Deps{Registry: reg, Metrics: m, Log: log,
			Ledger: st, Confirms: st}),
		Tools: fixedTools{reg}, Metrics: m, Log: log})
	t.Cleanup(c.wg.Wait)
	return c
}

// connect serves a new connection and returns its browser end, closed when
// the test ends.
func (c *core) connect() *fakeClient {
	w := newPipeWire()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.mgr.ServeWire(context.Background(), w, nil, session.Identity{User: "u"})
	}()
	c.t.Cleanup(func() { _ = w.CloseNow() })
	return &fakeClient{t: c.t, w: w, events: w.out}
}

// open starts a session without a connection (a fake outbound,
// session.Outbox), or resumes one, and returns it with what reads the
// events it sends.
func (c *core) open(resume *event) (*session.TestSession, *session.Outbox, *fakeClient) {
	out := session.NewOutbox(256, c.log)
	start := protocol.ClientMessage{Type: protocol.TypeSessionStart}
	if resume != nil {
		start.Resume = &protocol.Resume{SessionID: resume.SessionID, ResumeToken: resume.ResumeToken}
	}
	s := c.mgr.OpenTestSession(out, session.Identity{User: "u"}, start)
	c.t.Cleanup(s.End)
	return s, out, &fakeClient{t: c.t, events: out.Events}
}

// start connects and starts a new session (or resumes one).
func (c *core) start(resume *event) (*fakeClient, event) {
	cl := c.connect()
	msg := map[string]any{"type": "session.start"}
	if resume != nil {
		msg["resume"] = map[string]any{"sessionId": resume.SessionID, "resumeToken": resume.ResumeToken}
	}
	cl.send(msg)
	return cl, cl.next("session.ready")
}

// leave closes the browser's end and waits until the session let it go.
func (c *core) leave(cl *fakeClient) {
	_ = cl.w.CloseNow()
	testwait.For(c.t, "the connection to end", func() bool { return c.mgr.Active() == 0 })
}

// stallingStore is the store, whose BeginTurn (a typed turn's first
// write) and Create (a new session's record) can be held back, and its
// HandOff apart from them.
type stallingStore struct {
	store.Store
	gate     atomic.Pointer[chan struct{}] // nil: not held back
	waiting  atomic.Int64                  // calls held back now
	handGate atomic.Pointer[chan struct{}] // HandOff's (see stallHandOffs)
	handWait atomic.Int64                  // HandOff calls held back now
	fail     atomic.Bool                   // Create fails (after the hold)
	mu       sync.Mutex
	marks    [][]string // the sessions of each MarkLive
}

// stall holds every BeginTurn and Create back until the returned func is
// called.
func (s *stallingStore) stall() (release func()) {
	gate := make(chan struct{})
	s.gate.Store(&gate)
	var once sync.Once
	return func() { once.Do(func() { s.gate.Store(nil); close(gate) }) }
}

// stallHandOffs holds every HandOff back until the returned func is
// called.
func (s *stallingStore) stallHandOffs() (release func()) {
	gate := make(chan struct{})
	s.handGate.Store(&gate)
	var once sync.Once
	return func() { once.Do(func() { s.handGate.Store(nil); close(gate) }) }
}

func (s *stallingStore) HandOff(ctx context.Context, rec store.Record, h store.Handoff, event, record []byte) error {
	if err := wait(ctx, &s.handGate, &s.handWait); err != nil {
		return err
	}
	return s.Store.HandOff(ctx, rec, h, event, record)
}

// hold waits while the store is stalled, or until ctx ends.
func (s *stallingStore) hold(ctx context.Context) error { return wait(ctx, &s.gate, &s.waiting) }

// wait waits while gate holds a channel not closed yet, or until ctx
// ends, counted in waiting meanwhile.
func wait(ctx context.Context, gate *atomic.Pointer[chan struct{}], waiting *atomic.Int64) error {
	g := gate.Load()
	if g == nil {
		return nil
	}
	waiting.Add(1)
	defer waiting.Add(-1)
	select {
	case <-*g:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *stallingStore) BeginTurn(ctx context.Context, rec store.Record, user transport.Entry, lim store.TurnLimit) (store.TurnStart, error) {
	if err := s.hold(ctx); err != nil {
		return store.TurnStart{}, err
	}
	return s.Store.BeginTurn(ctx, rec, user, lim)
}

func (s *stallingStore) Create(ctx context.Context, rec store.Record) (store.Record, string, error) {
	if err := s.hold(ctx); err != nil {
		return store.Record{}, "", err
	}
	if s.fail.Load() {
		return store.Record{}, "", errors.New("redis: connection refused")
	}
	return s.Store.Create(ctx, rec)
}

// MarkLive notes the sessions of every write to the live index.
func (s *stallingStore) MarkLive(ctx context.Context, node string, ids []string, ttl time.Duration) error {
	s.mu.Lock()
	s.marks = append(s.marks, slices.Clone(ids))
	s.mu.Unlock()
	return s.Store.MarkLive(ctx, node, ids, ttl)
}

// liveMarks is the sessions of each write to the live index so far.
func (s *stallingStore) liveMarks() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.marks)
}
