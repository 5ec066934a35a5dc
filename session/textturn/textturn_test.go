package textturn_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"iter"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/internal/logtest"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/session/textturn"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tools/builtin"
	"github.com/turnstile-gw/turnstile/transport"
)

// The orchestrator runs handlers on goroutines of their own; none may
// outlive a test. The ignored workers belong to linked dependencies.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// fakeModel answers each request with the next step of its script and
// records the requests.
type fakeModel struct {
	mu    sync.Mutex
	steps []func() []transport.Chunk
	reqs  []transport.TextRequest
}

func (m *fakeModel) Stream(_ context.Context, req transport.TextRequest) iter.Seq2[transport.Chunk, error] {
	m.mu.Lock()
	req.History = slices.Clone(req.History)
	m.reqs = append(m.reqs, req)
	var chunks []transport.Chunk
	if n := len(m.reqs); n <= len(m.steps) {
		chunks = m.steps[n-1]()
	} else {
		chunks = []transport.Chunk{{Text: "(script over)"}}
	}
	m.mu.Unlock()
	return func(yield func(transport.Chunk, error) bool) {
		for i, c := range chunks {
			if i == len(chunks)-1 {
				c.FinishReason = "STOP"
			}
			if !yield(c, nil) {
				return
			}
		}
	}
}

func (m *fakeModel) requests() []transport.TextRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reqs)
}

// says answers with text chunks.
func says(parts ...string) func() []transport.Chunk {
	return func() []transport.Chunk {
		var out []transport.Chunk
		for _, p := range parts {
			out = append(out, transport.Chunk{Text: p})
		}
		return out
	}
}

// calls answers with function calls, numbered in the order given.
func calls(cs ...transport.FunctionCall) func() []transport.Chunk {
	return func() []transport.Chunk { return []transport.Chunk{{Calls: cs}} }
}

func fc(id, name string, args map[string]any) transport.FunctionCall {
	return transport.FunctionCall{ID: id, Name: name, Args: args}
}

// fakeHost is the session as a text turn sees it.
type fakeHost struct {
	mu        sync.Mutex
	history   []transport.Entry
	events    []protocol.Event
	committed []transport.Entry
	applied   []intents.Intent
}

func (h *fakeHost) Send(ev protocol.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, ev)
}

func (h *fakeHost) History() []transport.Entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.history)
}

func (h *fakeHost) Commit(es []transport.Entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.committed = append(h.committed, es...)
	h.history = append(h.history, es...)
}

func (h *fakeHost) Apply(_ int, ins []intents.Intent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.applied = append(h.applied, ins...)
}

func (h *fakeHost) ToolEvents(int) orchestrator.Events { return noEvents{} }

// texts returns the text of every event of the given type.
func (h *fakeHost) texts(typ string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, ev := range h.events {
		switch tt := ev.(type) {
		case protocol.TextDelta:
			if typ == tt.EventType() {
				out = append(out, tt.Text)
			}
		case protocol.TextDone:
			if typ == tt.EventType() {
				out = append(out, tt.Text)
			}
		}
	}
	return out
}

func (h *fakeHost) errors() []protocol.Error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []protocol.Error
	for _, ev := range h.events {
		if e, ok := ev.(protocol.Error); ok {
			out = append(out, e)
		}
	}
	return out
}

// toolResponses returns the committed answers to the model, by call ID.
func (h *fakeHost) toolResponses() map[string]map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]map[string]any{}
	for _, e := range h.committed {
		for _, r := range e.Results {
			out[r.ID] = r.Response
		}
	}
	return out
}

type noEvents struct{}

func (noEvents) CallReceived(orchestrator.Call, map[string]any)       {}
func (noEvents) CallFinished(orchestrator.Call, orchestrator.Outcome) {}
func (noEvents) ConfirmRequested(orchestrator.Confirmation)           {}

// fixture is a text turn's world: a registry with the built-in finish and
// start_voice_session and test tools, an orchestrator, a fake model and a
// fake host.
type fixture struct {
	cfg   textturn.Config
	model *fakeModel
	host  *fakeHost
	orch  *orchestrator.Orchestrator
	deps  textturn.Deps
	log   *logtest.Buffer
	ran   map[string]*atomic.Int64
	turn  int
}

const testSystem = "You are the shop's assistant."

func newFixture(t *testing.T, steps ...func() []transport.Chunk) *fixture {
	t.Helper()
	f := &fixture{model: &fakeModel{steps: steps}, log: &logtest.Buffer{}, ran: map[string]*atomic.Int64{},
		host: &fakeHost{history: []transport.Entry{{Role: transport.RoleUser, Text: "hi", Turn: 1}}}}
	manifest := func(name, extra, params string) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte(`{"name": "` + name + `", "category": "action", "modes": ["text"], ` + extra +
			`"redact": {"args": [], "result": []}, "parameters": {"type": "object", "properties": {` + params + `}}}`)}
	}
	fsys := fstest.MapFS{
		"lookup/schema.json":  manifest("lookup", "", `"id": {"type": "string"}`),
		"lookup/guide.md":     {Data: []byte("# lookup\n\nLook an order up.\n")},
		"hang_up/schema.json": manifest("hang_up", `"terminal": true,`, `"text": {"type": "string"}`),
		"hang_up/guide.md":    {Data: []byte("# hang_up\n\nEnd the conversation with a last sentence.\n")},
	}
	handlers := map[string]tools.Handler{
		"lookup": tools.HandlerFunc(func(_ context.Context, c tools.Call) tools.Envelope {
			return tools.OK(map[string]any{"status": "shipped\x00"})
		}),
		// hang_up fails for the text "fail".
		"hang_up": tools.HandlerFunc(func(_ context.Context, c tools.Call) tools.Envelope {
			var args struct{ Text string }
			_ = json.Unmarshal(c.Args, &args)
			if args.Text == "fail" {
				return tools.Fail(tools.ErrPermanent, "the line is busy", false, false)
			}
			return tools.OK(map[string]any{"text": args.Text})
		}),
	}
	built := builtin.Handlers(nil)
	for _, name := range []string{"finish", "start_voice_session"} {
		for _, file := range []string{"schema.json", "guide.md"} {
			b, err := fs.ReadFile(builtin.FS, name+"/"+file)
			if err != nil {
				t.Fatal(err)
			}
			fsys[name+"/"+file] = &fstest.MapFile{Data: b}
		}
		handlers[name] = built[name]
	}
	for name, h := range handlers {
		n := &atomic.Int64{}
		f.ran[name] = n
		handlers[name] = tools.HandlerFunc(func(ctx context.Context, c tools.Call) tools.Envelope {
			n.Add(1)
			return h.Handle(ctx, c)
		})
	}
	reg, err := tools.Load(fsys, handlers)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(f.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m := metrics.New(prometheus.NewRegistry(), metrics.Build{Version: "test"})
	f.orch = orchestrator.New(reg, m, log)
	f.deps = textturn.Deps{Model: f.model, Metrics: m, Log: log.With("session", "s1")}
	f.cfg = textturn.Config{System: testSystem, MaxToolIterations: 5, ModelTimeout: 5 * time.Second}
	return f
}

// run runs the next turn.
func (f *fixture) run(t *testing.T) protocol.TurnEnd {
	t.Helper()
	f.turn++
	ot := f.orch.NewTurn(orchestrator.Session{ID: "s1", UserID: "u1", Mode: protocol.ModeText}, f.turn, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	return textturn.Run(ctx, f.cfg, f.deps, f.host, ot, "")
}

func (f *fixture) wantModelCalls(t *testing.T, n int) {
	t.Helper()
	if got := len(f.model.requests()); got != n {
		t.Errorf("the model was called %d times, want %d", got, n)
	}
}

func (f *fixture) wantAnswer(t *testing.T, want string) {
	t.Helper()
	if done := f.host.texts(protocol.TypeTextDone); len(done) != 1 || done[0] != want {
		t.Errorf("text.done %q, want exactly %q", done, want)
	}
}

func TestTerminalToolOutputIsTheAnswerAndTheModelIsNotCalledAgain(t *testing.T) {
	f := newFixture(t, calls(fc("h", "hang_up", map[string]any{"text": "Goodbye, and thanks."})))
	if reason := f.run(t); reason != protocol.ReasonTerminalTool {
		t.Fatalf("reason %q, want terminal_tool", reason)
	}
	f.wantAnswer(t, "Goodbye, and thanks.")
	f.wantModelCalls(t, 1)
	if last := f.host.committed[len(f.host.committed)-1]; last.Role != transport.RoleModel || last.Text != "Goodbye, and thanks." {
		t.Errorf("last committed entry %+v, want the answer as the model's", last)
	}
}

func TestFinishEndsTheTurnWithItsNoteOrFinished(t *testing.T) {
	for _, tc := range []struct {
		args map[string]any
		want string
	}{{map[string]any{"note": "Your order ships Monday."}, "Your order ships Monday."}, {nil, "Finished"}} {
		f := newFixture(t, calls(fc("f", "finish", tc.args)))
		if reason := f.run(t); reason != protocol.ReasonFinish {
			t.Fatalf("reason %q, want finish", reason)
		}
		f.wantAnswer(t, tc.want)
		f.wantModelCalls(t, 1)
		if out := f.host.toolResponses()["f"]["output"]; out != tc.want {
			t.Errorf("finish answered %v, want %q", out, tc.want)
		}
	}
}

func TestSecondTerminalCallInARoundIsAnErrorAndDoesNotRun(t *testing.T) {
	f := newFixture(t, calls(fc("a", "hang_up", map[string]any{"text": "Bye."}), fc("b", "finish", map[string]any{"note": "Done."})))
	if reason := f.run(t); reason != protocol.ReasonTerminalTool {
		t.Fatalf("reason %q, want terminal_tool", reason)
	}
	f.wantAnswer(t, "Bye.")
	f.wantModelCalls(t, 1)
	second := f.host.toolResponses()["b"]
	if e, _ := second["error"].(map[string]any); second["ok"] != false || e["type"] != string(tools.ErrConflict) {
		t.Errorf("second terminal call answered %v, want a CONFLICT error", second)
	}
	if n := f.ran["finish"].Load(); n != 0 {
		t.Errorf("the second terminal call ran %d times", n)
	}
}

func TestTerminalAndRegularCallsAreAllAnsweredAndTheTerminalOutputWins(t *testing.T) {
	f := newFixture(t, calls(fc("l1", "lookup", nil), fc("h", "hang_up", map[string]any{"text": "All set."}),
		fc("l2", "lookup", map[string]any{"id": "2"})))
	if reason := f.run(t); reason != protocol.ReasonTerminalTool {
		t.Fatalf("reason %q", reason)
	}
	f.wantAnswer(t, "All set.")
	f.wantModelCalls(t, 1)
	resp := f.host.toolResponses()
	for _, id := range []string{"l1", "h", "l2"} {
		if resp[id]["ok"] != true {
			t.Errorf("call %s answered %v, want a success", id, resp[id])
		}
	}
}

func TestFailedTerminalCallLetsTheLoopGoOn(t *testing.T) {
	f := newFixture(t, calls(fc("h", "hang_up", map[string]any{"text": "fail"})), says("Sorry, I could not hang up."))
	if reason := f.run(t); reason != protocol.ReasonEndTurn {
		t.Fatalf("reason %q, want end_turn", reason)
	}
	f.wantAnswer(t, "Sorry, I could not hang up.")
	reqs := f.model.requests()
	if len(reqs) != 2 {
		t.Fatalf("the model was called %d times, want 2", len(reqs))
	}
	last := reqs[1].History[len(reqs[1].History)-1]
	if len(last.Results) != 1 || last.Results[0].Response["ok"] != false {
		t.Errorf("the second request ends with %+v, want the failed call's error", last)
	}
}

func TestModeTransitionWinsOverATerminalToolWhoseOutputIsOnlyHistory(t *testing.T) {
	f := newFixture(t, calls(fc("v", "start_voice_session", nil), fc("h", "hang_up", map[string]any{"text": "Bye."})),
		says("Switching to voice."))
	if reason := f.run(t); reason != protocol.ReasonEndTurn {
		t.Fatalf("reason %q, want end_turn", reason)
	}
	f.wantAnswer(t, "Switching to voice.")
	f.wantModelCalls(t, 2)
	if !slices.ContainsFunc(f.host.applied, func(in intents.Intent) bool { return in.Type == intents.StartVoiceSession }) {
		t.Errorf("intents applied %+v, want START_VOICE_SESSION", f.host.applied)
	}
	if out, _ := f.host.toolResponses()["h"]["output"].(map[string]any); out["text"] != "Bye." {
		t.Errorf("the terminal output is not in the history: %v", f.host.toolResponses()["h"])
	}
}

func TestIterationLimitIsAnError(t *testing.T) {
	loop := calls(fc("", "lookup", nil))
	f := newFixture(t, loop, loop, loop)
	f.cfg.MaxToolIterations = 2
	if reason := f.run(t); reason != protocol.ReasonMaxIterations {
		t.Fatalf("reason %q, want max_iterations", reason)
	}
	f.wantModelCalls(t, 2)
	errs := f.host.errors()
	want := protocol.Error{Code: protocol.CodeMaxIterations,
		Message: "max tool iterations (2) exceeded", Retryable: false, Turn: 1}
	if len(errs) != 1 || errs[0] != want {
		t.Errorf("errors %+v, want %+v", errs, want)
	}
	if len(f.host.committed) != 4 {
		t.Errorf("committed %d entries, want both rounds' calls and results", len(f.host.committed))
	}
}

func TestRestrictedOutputKeepsThePlainAnswerBeforeTheSpecsInstruction(t *testing.T) {
	f := newFixture(t, says("A plain answer."), calls(fc("f", "finish", map[string]any{"note": "Ships Monday."})))
	f.cfg.RestrictOutput = true // the default message
	if reason := f.run(t); reason != protocol.ReasonFinish {
		t.Fatalf("reason %q, want finish", reason)
	}
	f.wantAnswer(t, "Ships Monday.")
	if deltas := f.host.texts(protocol.TypeTextDelta); len(deltas) != 0 {
		t.Errorf("the user saw %q", deltas)
	}
	reqs := f.model.requests()
	if len(reqs) != 2 {
		t.Fatalf("the model was called %d times, want 2", len(reqs))
	}
	h := reqs[1].History
	want := []transport.Entry{
		{Role: transport.RoleUser, Text: "hi", Turn: 1},
		{Role: transport.RoleModel, Text: "A plain answer.", Turn: 1},
		{Role: transport.RoleSystem, Text: "Do not produce a final answer directly. " +
			"Before finishing, call a tool. If no tool is needed, call the 'finish' tool.", Turn: 1},
	}
	if len(h) != len(want) {
		t.Fatalf("second request's history %+v, want %+v", h, want)
	}
	for i := range want {
		if h[i].Role != want[i].Role || h[i].Text != want[i].Text || h[i].Kind != want[i].Kind {
			t.Errorf("history[%d] = %+v, want %+v", i, h[i], want[i])
		}
	}
	for i, r := range reqs {
		if r.System != testSystem {
			t.Errorf("request %d's system instruction %q, want the base prompt unchanged", i, r.System)
		}
	}
	for _, e := range f.host.committed {
		if e.Text == "A plain answer." || e.Role == transport.RoleSystem {
			t.Errorf("committed %+v, which the user never saw", e)
		}
	}
}

func TestRestrictionInjectionsResetEveryTurn(t *testing.T) {
	plain := says("plain")
	f := newFixture(t, plain, plain, plain, plain)
	f.cfg.RestrictOutput, f.cfg.RestrictionMaxInjections, f.cfg.RestrictionMessage = true, 1, "USE finish."
	for turn := 1; turn <= 2; turn++ {
		if reason := f.run(t); reason != protocol.ReasonEndTurn {
			t.Fatalf("turn %d: reason %q", turn, reason)
		}
		f.wantModelCalls(t, 2*turn)
		last := f.model.requests()[2*turn-1]
		if got := last.History[len(last.History)-1]; got.Text != "USE finish." || got.Turn != turn {
			t.Errorf("turn %d: second request ends with %+v, want this turn's injection", turn, got)
		}
		// The first request of the turn carries no injection of its own.
		first := f.model.requests()[2*turn-2]
		if got := first.History[len(first.History)-1]; got.Role == transport.RoleSystem && got.Turn == turn {
			t.Errorf("turn %d: first request already injected", turn)
		}
	}
}

func TestControlCharactersAreStrippedFromModelText(t *testing.T) {
	f := newFixture(t, says("Hel\x00", "lo\x1b[0m", "\x7f"))
	f.run(t)
	if deltas := f.host.texts(protocol.TypeTextDelta); !slices.Equal(deltas, []string{"Hel", "lo[0m"}) {
		t.Errorf("deltas %q, want the text without control characters", deltas)
	}
	f.wantAnswer(t, "Hello[0m")
	if last := f.host.committed[len(f.host.committed)-1]; last.Text != "Hello[0m" {
		t.Errorf("stored %q", last.Text)
	}
}

func TestToolLoopDebugEventsCarrySessionAndTurn(t *testing.T) {
	f := newFixture(t, calls(fc("l", "lookup", nil)), says("Shipped."))
	f.run(t)
	log := f.log.String()
	for _, want := range [][]string{
		{`msg="executing tool calls"`, "iteration=1", "count=1"},
		{`msg="executing tool"`, "tool=lookup", "call=l"},
		{`msg="tool loop complete"`, "iterations=2", "reason=end_turn"},
	} {
		want = append(want, "level=DEBUG", "session=s1", "turn=1")
		found := false
		for _, line := range strings.Split(log, "\n") {
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(line, w)
			}
			found = found || ok
		}
		if !found {
			t.Errorf("no log line with %v in:\n%s", want, log)
		}
	}
}

func TestATurnNotAdmittedShowsCommitsAndRunsNothing(t *testing.T) {
	f := newFixture(t, calls(fc("l", "lookup", map[string]any{"id": "1"})), says("shipped"))
	asked := 0
	f.deps.Admitted = func() bool { asked++; return false }
	if reason := f.run(t); reason != textturn.ReasonNotAdmitted {
		t.Fatalf("reason %q, want %q", reason, textturn.ReasonNotAdmitted)
	}
	if asked != 1 || len(f.host.events) != 0 || len(f.host.committed) != 0 || f.ran["lookup"].Load() != 0 {
		t.Fatalf("asked %d times; events %v, committed %v, lookup ran %d times: want asked once and nothing else",
			asked, f.host.events, f.host.committed, f.ran["lookup"].Load())
	}
	f.wantModelCalls(t, 1)
}

func TestAnAdmittedTurnIsAskedOnceAndRunsToItsAnswer(t *testing.T) {
	f := newFixture(t, calls(fc("l", "lookup", map[string]any{"id": "1"})), says("shipped"))
	asked := 0
	f.deps.Admitted = func() bool { asked++; return true }
	if reason := f.run(t); reason != protocol.ReasonEndTurn {
		t.Fatalf("reason %q, want end_turn", reason)
	}
	if asked != 1 || f.ran["lookup"].Load() != 1 {
		t.Fatalf("asked %d times, lookup ran %d times: want once each", asked, f.ran["lookup"].Load())
	}
	f.wantAnswer(t, "shipped")
}
