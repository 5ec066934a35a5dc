package voice

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/session/turnrec"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/transport"
)

// fakeUp is an upstream Live connection the test drives: it feeds events
// through say, and records what the voice side sends, in order.
type fakeUp struct {
	events chan transport.LiveEvent
	closed chan struct{}
	once   sync.Once

	mu    sync.Mutex
	sent  []sent
	audio []byte
}

// sent is one thing the voice side sent upstream.
type sent struct {
	kind      string // audio, audioEnd, text, context, tools
	text      string
	responses []transport.FunctionResult
}

func newFakeUp() *fakeUp {
	return &fakeUp{events: make(chan transport.LiveEvent, 64), closed: make(chan struct{})}
}

func (u *fakeUp) Recv() (transport.LiveEvent, error) {
	select {
	case ev := <-u.events:
		return ev, nil
	case <-u.closed:
		return transport.LiveEvent{}, transport.ErrSessionClosed
	}
}

func (u *fakeUp) record(s sent) error {
	select {
	case <-u.closed:
		return transport.ErrSessionClosed
	default:
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.sent = append(u.sent, s)
	return nil
}

func (u *fakeUp) SendAudio(pcm []byte) error {
	if err := u.record(sent{kind: "audio"}); err != nil {
		return err
	}
	u.mu.Lock()
	u.audio = append(u.audio, pcm...)
	u.mu.Unlock()
	return nil
}
func (u *fakeUp) SendAudioEnd() error           { return u.record(sent{kind: "audioEnd"}) }
func (u *fakeUp) SendText(text string) error    { return u.record(sent{kind: "text", text: text}) }
func (u *fakeUp) SendContext(text string) error { return u.record(sent{kind: "context", text: text}) }
func (u *fakeUp) SendToolResponses(r []transport.FunctionResult) error {
	return u.record(sent{kind: "tools", responses: r})
}
func (u *fakeUp) Close() error { u.once.Do(func() { close(u.closed) }); return nil }

func (u *fakeUp) say(evs ...transport.LiveEvent) {
	for _, ev := range evs {
		u.events <- ev
	}
}

// sends returns what was sent upstream so far, other than audio.
func (u *fakeUp) sends() []sent {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []sent
	for _, s := range u.sent {
		if s.kind != "audio" {
			out = append(out, s)
		}
	}
	return out
}

func (u *fakeUp) isClosed() bool {
	select {
	case <-u.closed:
		return true
	default:
		return false
	}
}

// fakeLive hands out fake upstreams, one per Connect, to the test.
type fakeLive struct {
	ups     chan *fakeUp
	configs chan transport.LiveConfig
}

func newFakeLive() *fakeLive {
	return &fakeLive{ups: make(chan *fakeUp, 8), configs: make(chan transport.LiveConfig, 8)}
}

func (l *fakeLive) Connect(ctx context.Context, cfg transport.LiveConfig) (transport.LiveSession, error) {
	u := newFakeUp()
	l.configs <- cfg
	l.ups <- u
	return u, nil
}

// fakeHost is the session as the voice side sees it, recording what the
// browser would get.
type fakeHost struct {
	mu       sync.Mutex
	events   []protocol.Event
	audio    []byte
	turn     int
	ended    chan string
	lost     chan error
	entries  []transport.Entry
	handles  []string
	pending  string
	blocks   []time.Duration
	handoffs []string
	// drained is what AudioDrained returns; nil: a closed channel (no
	// audio waiting).
	drained chan struct{}
	history []transport.Entry
	applied []intents.Type
	// responses are the finished turns' VoiceResponse, in order.
	responses []time.Duration
}

func newFakeHost() *fakeHost {
	return &fakeHost{ended: make(chan string, 1), lost: make(chan error, 1)}
}

func (h *fakeHost) Send(ev protocol.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, ev)
}
func (h *fakeHost) SendAudio(pcm []byte, _ time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.audio = append(h.audio, pcm...)
	return true
}
func (h *fakeHost) AudioWontWait() bool { return true }
func (h *fakeHost) DropAudio()          {}
func (h *fakeHost) AudioDrained() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.drained == nil {
		return closedChan
	}
	return h.drained
}
func (h *fakeHost) ToolEvents(turn int) orchestrator.Events { return nopEvents{} }
func (h *fakeHost) BeginTurn() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.turn++
	return h.turn
}

// TurnEnded is the session's record of a finished turn (turnrec.Sink).
func (h *fakeHost) TurnEnded(end turnrec.End) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.entries = append(h.entries, end.Entries...)
	h.handles = append(h.handles, end.Handle)
	h.responses = append(h.responses, end.VoiceResponse)
}
func (h *fakeHost) SaveHandle(handle string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.handles = append(h.handles, handle)
}
func (h *fakeHost) TakePending() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.pending
	h.pending = ""
	return p
}
func (h *fakeHost) History() []transport.Entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.history
}
func (h *fakeHost) BlockUser(d time.Duration, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.blocks = append(h.blocks, d)
}
func (h *fakeHost) HandOff(turn int, reason, summary string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.handoffs = append(h.handoffs, reason+": "+summary)
}
func (h *fakeHost) handedOff() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.handoffs...)
}
func (h *fakeHost) SetPendingMessage(msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pending = msg
}
func (h *fakeHost) IntentApplied(turn int, typ intents.Type, applied bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if applied {
		h.applied = append(h.applied, typ)
	}
}
func (h *fakeHost) Ended(reason string) { h.ended <- reason }
func (h *fakeHost) Lost(err error)      { h.lost <- err }

// types lists the browser events' types, with turn.done reasons.
func (h *fakeHost) types() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, ev := range h.events {
		b, _ := protocol.Encode(ev)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		t, _ := m["type"].(string)
		if r, ok := m["reason"].(string); ok && t == protocol.TypeTurnDone {
			t += ":" + r
		}
		out = append(out, t)
	}
	return out
}

// ofType returns the events of one type, as JSON maps.
func (h *fakeHost) ofType(typ string) []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]any
	for _, ev := range h.events {
		b, _ := protocol.Encode(ev)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		if m["type"] == typ {
			out = append(out, m)
		}
	}
	return out
}

type nopEvents struct{}

func (nopEvents) CallReceived(orchestrator.Call, map[string]any)       {}
func (nopEvents) CallFinished(orchestrator.Call, orchestrator.Outcome) {}
func (nopEvents) ConfirmRequested(orchestrator.Confirmation)           {}

// testTools are the tools the voice tests call. release lets "slow" answer.
type testTools struct {
	release chan struct{}
	ran     sync.Map // name -> count
}

func (tt *testTools) registry(t *testing.T) *tools.Registry {
	t.Helper()
	var ts []*tools.Tool
	add := func(name string, m func(*tools.Manifest), h tools.HandlerFunc) {
		man := tools.Manifest{Name: name, Category: tools.CategoryUtility, Modes: []protocol.Mode{"text", "voice"},
			Description: "A test tool.", Parameters: json.RawMessage(`{"type":"object"}`),
			Redact: tools.Redact{Args: []string{}, Result: []string{}}}
		if m != nil {
			m(&man)
		}
		tool, err := tools.NewTool(tools.Spec{Manifest: man, Handler: tools.HandlerFunc(func(ctx context.Context, c tools.Call) tools.Envelope {
			n, _ := tt.ran.LoadOrStore(name, new(int))
			*(n.(*int))++
			return h(ctx, c)
		})})
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, tool)
	}
	add("lookup", nil, func(context.Context, tools.Call) tools.Envelope {
		return tools.OK(map[string]any{"answer": "forty-two"})
	})
	add("slow", nil, func(ctx context.Context, _ tools.Call) tools.Envelope {
		select {
		case <-tt.release:
			return tools.OK("done")
		case <-ctx.Done():
			return tools.Fail(tools.ErrTransient, "cancelled", false, true)
		}
	})
	add("hang_up", func(m *tools.Manifest) { m.Terminal = true }, func(context.Context, tools.Call) tools.Envelope {
		return tools.OK("Goodbye, and thanks for calling.")
	})
	add("quiet", nil, func(context.Context, tools.Call) tools.Envelope {
		return tools.OK("ok", intents.Intent{Type: intents.SuppressAudio}, intents.Intent{Type: intents.SuppressTranscript})
	})
	add("remind", nil, func(context.Context, tools.Call) tools.Envelope {
		return tools.OK("ok", intents.Intent{Type: intents.SetPendingMessage, Message: "the user prefers short answers"})
	})
	add("to_person", nil, func(context.Context, tools.Call) tools.Envelope {
		return tools.OK("ok", intents.Intent{Type: intents.HandOff, Reason: "refund", Message: "wants 300 EUR back"})
	})
	add("bye", nil, func(context.Context, tools.Call) tools.Envelope {
		return tools.OK("ok", intents.Intent{Type: intents.EndVoiceSession})
	})
	reg, err := tools.Combine(ts)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// rig is a voice side on fakes: the test is the model (up) and reads what
// the browser got (host).
type rig struct {
	t     *testing.T
	v     *Session
	host  *fakeHost
	live  *fakeLive
	up    *fakeUp
	tools *testTools
	m     *metrics.Metrics
}

func newRig(t *testing.T) *rig { t.Helper(); return newRigOn(t, nil, newFakeHost()) }

// newRigOn is newRig with a clock (nil: the system clock) and a host.
func newRigOn(t *testing.T, clk clock.Clock, host *fakeHost) *rig {
	t.Helper()
	tt := &testTools{release: make(chan struct{})}
	reg := tt.registry(t)
	m := metrics.New(prometheus.NewRegistry(), metrics.Build{Version: "test"})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	orch := orchestrator.New(reg, m, log)
	live := newFakeLive()
	v, err := Start(t.Context(), Config{DrainMax: time.Second}, Deps{Live: live,
		Turns: turnrec.Deps{Conversation: orch.Open(orchestrator.Session{ID: "s1", UserID: "u1", Channel: metrics.ChannelBrowser}),
			Sink: host},
		Metrics: m, Log: log,
		Clock: clk}, host, "", metrics.ConnectVoiceStart)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, v: v, host: host, live: live, up: <-live.ups, tools: tt, m: m}
	t.Cleanup(func() {
		select {
		case <-tt.release:
		default:
			close(tt.release)
		}
		v.Stop()
	})
	return r
}

func audioEv(n int) transport.LiveEvent {
	return transport.LiveEvent{Kind: transport.LiveAudio, Audio: make([]byte, n)}
}
func outText(s string) transport.LiveEvent {
	return transport.LiveEvent{Kind: transport.LiveOutputTranscript, Text: s}
}
func inText(s string) transport.LiveEvent {
	return transport.LiveEvent{Kind: transport.LiveInputTranscript, Text: s}
}
func call(id, name string) transport.LiveEvent {
	return transport.LiveEvent{Kind: transport.LiveToolCall, Calls: []transport.FunctionCall{{ID: id, Name: name, Args: map[string]any{}}}}
}

var (
	turnComplete = transport.LiveEvent{Kind: transport.LiveTurnComplete}
	genComplete  = transport.LiveEvent{Kind: transport.LiveGenerationComplete}
)

func (h *fakeHost) audioLen() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.audio)
}

func (h *fakeHost) entryList() []transport.Entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]transport.Entry(nil), h.entries...)
}

func (h *fakeHost) handleList() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.handles...)
}

func (u *fakeUp) audioSent() []byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]byte(nil), u.audio...)
}

func (h *fakeHost) turnResponses() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Duration(nil), h.responses...)
}
