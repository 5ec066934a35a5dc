package orchestrator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/internal/logtest"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/tools"
)

// Execute runs every handler on its own goroutine; none may outlive a test.
// The ignored workers are process-lifetime goroutines started by linked
// dependencies' init functions.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// handlerSlow is how long the slow handlers would take if nobody stopped
// them; every assertion about promptness is far below it.
const handlerSlow = 5 * time.Second

// stubbornFor is how long the "stubborn" handler ignores its context.
const stubbornFor = 600 * time.Millisecond

// toolSpec is one test tool: its manifest fields and its handler.
type toolSpec struct {
	category  string // retrieval|action|utility; default utility
	extra     string // more manifest members, each followed by a comma
	modes     string // JSON array body, e.g. `"text","voice"`
	timeoutMs int
	params    string // JSON object body of "properties"
	required  string // JSON array body
	redact    string // JSON array body of redact.args
	shown     string // JSON array body of redact.result
	handler   tools.HandlerFunc
}

func (s toolSpec) schema(name string) string {
	timeout := s.extra
	if s.timeoutMs > 0 {
		timeout += fmt.Sprintf(`"timeoutMs": %d,`, s.timeoutMs)
	}
	category := s.category
	if category == "" {
		category = "utility"
	}
	return fmt.Sprintf(`{
  "name": %q,
  "category": %q,
  "modes": [%s],
  %s
  "redact": {"args": [%s], "result": [%s]},
  "parameters": {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {%s},
    "required": [%s],
    "additionalProperties": false
  }
}`, name, category, s.modes, timeout, s.redact, s.shown, s.params, s.required)
}

// fixture is an orchestrator over a fresh registry of test tools, with its
// own Prometheus registry and log buffer.
type fixture struct {
	orch  *orchestrator.Orchestrator
	tools *tools.Registry
	reg   *prometheus.Registry
	m     *metrics.Metrics
	log   *logtest.Buffer

	// slowCtxErr receives the context error the "slow" handler saw.
	slowCtxErr chan error
	// stubbornDone is closed when the "stubborn" handler returns.
	stubbornDone chan struct{}
	// blockerStarted is closed when the "blocker" handler starts;
	// blockerRelease lets it return.
	blockerStarted chan struct{}
	blockerRelease chan struct{}
	// echoRuns counts how often the "echo" handler ran.
	echoRuns atomic.Int64
	// ran counts how often each tool's handler ran, by tool name; the map
	// is written only while the fixture is built.
	ran map[string]*atomic.Int64
}

// runs is how often the named tool's handler ran.
func (f *fixture) runs(name string) int64 { return f.ran[name].Load() }

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{
		reg:            prometheus.NewRegistry(),
		log:            &logtest.Buffer{},
		slowCtxErr:     make(chan error, 1),
		stubbornDone:   make(chan struct{}),
		blockerStarted: make(chan struct{}),
		blockerRelease: make(chan struct{}),
	}
	var blockerOnce, stubbornOnce sync.Once
	both := `"text","voice"`
	specs := map[string]toolSpec{
		"echo": {modes: both, params: `"text": {"type": "string", "minLength": 1}, "secret": {"type": "string"}`,
			required: `"text"`, redact: `"text"`,
			handler: func(_ context.Context, c tools.Call) tools.Envelope {
				f.echoRuns.Add(1)
				var args struct{ Text string }
				if err := json.Unmarshal(c.Args, &args); err != nil {
					return tools.Fail(tools.ErrPermanent, err.Error(), false, false)
				}
				return tools.OK(map[string]any{"echo": args.Text, "mode": string(c.Mode), "session": c.SessionID})
			}},
		"noop": {modes: both, handler: func(context.Context, tools.Call) tools.Envelope { return tools.OK(nil) }},
		"boom": {modes: both, handler: func(context.Context, tools.Call) tools.Envelope {
			panic("handler exploded")
		}},
		"slow": {modes: both, timeoutMs: 50, handler: func(ctx context.Context, _ tools.Call) tools.Envelope {
			select {
			case <-ctx.Done():
				f.slowCtxErr <- ctx.Err()
				time.Sleep(100 * time.Millisecond) // unwinding takes a moment
				return tools.Fail(tools.ErrTransient, "gave up", true, false)
			case <-time.After(handlerSlow):
				f.slowCtxErr <- nil
				return tools.OK("too late")
			}
		}},
		// quitter gives up the instant its context ends, as the built-in
		// kb handlers do.
		"quitter": {modes: both, timeoutMs: 20, handler: func(ctx context.Context, _ tools.Call) tools.Envelope {
			<-ctx.Done()
			return tools.Fail(tools.ErrTransient, "the call was cancelled before it finished", true, false)
		}},
		"stubborn": {modes: both, timeoutMs: 50, handler: func(context.Context, tools.Call) tools.Envelope {
			defer stubbornOnce.Do(func() { close(f.stubbornDone) })
			time.Sleep(stubbornFor) // ignores ctx on purpose
			return tools.OK("finished anyway")
		}},
		"blocker": {modes: both, handler: func(context.Context, tools.Call) tools.Envelope {
			blockerOnce.Do(func() { close(f.blockerStarted) })
			<-f.blockerRelease // ignores ctx on purpose
			return tools.OK("released")
		}},
		"voice_only": {modes: `"voice"`, handler: func(context.Context, tools.Call) tools.Envelope {
			return tools.OK("spoken")
		}},
		"ok_with_error": {modes: both, handler: func(context.Context, tools.Call) tools.Envelope {
			return tools.Envelope{OK: true, Data: "x", Error: &tools.Error{Type: tools.ErrPermanent, Message: "both"}}
		}},
		"fail_without_error": {modes: both, handler: func(context.Context, tools.Call) tools.Envelope {
			return tools.Envelope{OK: false, Data: "x"}
		}},
		"fail_untyped": {modes: both, handler: func(context.Context, tools.Call) tools.Envelope {
			return tools.Envelope{Error: &tools.Error{Message: "no type given"}}
		}},
		"bad_intent": {modes: both, handler: func(context.Context, tools.Call) tools.Envelope {
			return tools.OK("done", intents.Intent{Type: "SELF_DESTRUCT"})
		}},
		"empty_pending": {modes: both, handler: func(context.Context, tools.Call) tools.Envelope {
			return tools.OK("done", intents.Intent{Type: intents.SetPendingMessage})
		}},
		"good_intent": {modes: both, handler: func(context.Context, tools.Call) tools.Envelope {
			return tools.OK("bye", intents.Intent{Type: intents.EndVoiceSession, Reason: "user said bye"})
		}},
		"fail_weird": {modes: both, handler: func(context.Context, tools.Call) tools.Envelope {
			return tools.Fail("SOMETHING_ODD", "an error type nobody knows", true, false)
		}},
		"profile": {modes: both, shown: `"name", "plan"`, handler: func(context.Context, tools.Call) tools.Envelope {
			return tools.OK(map[string]any{"name": "Ada", "plan": "pro", "email": "ada@example.com"})
		}},
		"rate_limited": {modes: both, handler: func(context.Context, tools.Call) tools.Envelope {
			return tools.Fail(tools.ErrRateLimit, "the backend asks to slow down", true, false)
		}},
	}
	for name, s := range policyTools() {
		specs[name] = s
	}
	for name, s := range endingTools() {
		specs[name] = s
	}
	for name, s := range untrustedTools() {
		specs[name] = s
	}
	fsys := fstest.MapFS{}
	handlers := map[string]tools.Handler{}
	f.ran = map[string]*atomic.Int64{}
	for name, s := range specs {
		fsys[name+"/schema.json"] = &fstest.MapFile{Data: []byte(s.schema(name))}
		fsys[name+"/guide.md"] = &fstest.MapFile{Data: []byte("# " + name + "\n\nA test tool.\n")}
		handlers[name] = counted(s.handler, f.ran, name)
	}
	addBuiltinFinish(t, fsys, handlers, f.ran)
	addBuiltin(t, fsys, handlers, f.ran, ignoreUserTool)
	toolReg, err := tools.Load(fsys, handlers)
	if err != nil {
		t.Fatalf("load test registry: %v", err)
	}
	f.m = metrics.New(f.reg, metrics.Build{Version: "test"})
	log := slog.New(slog.NewTextHandler(f.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f.tools = toolReg
	f.orch = orchestrator.New(toolReg, f.m, log)
	t.Cleanup(func() {
		// Let handlers that ignore ctx finish, so no goroutine outlives the test.
		select {
		case <-f.blockerRelease:
		default:
			close(f.blockerRelease)
		}
	})
	return f
}

func (f *fixture) exec(ctx context.Context, name string, args map[string]any) orchestrator.Outcome {
	return f.orch.Execute(ctx, orchestrator.Call{ID: "call-1", Name: name, Args: args,
		SessionID: "sess-1", UserID: "user-1", Mode: tools.ModeText, Turn: 1})
}

// histogram returns the sample count and sum of a histogram series with
// label tool=tool, or zeros when there is none.
func (f *fixture) histogram(t *testing.T, name, tool string) (uint64, float64) {
	t.Helper()
	for _, m := range f.series(t, name) {
		if label(m, "tool") == tool {
			return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
		}
	}
	return 0, 0
}

// series returns every series of the named metric family.
func (f *fixture) series(t *testing.T, name string) []*dto.Metric {
	t.Helper()
	families, err := f.reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, fam := range families {
		if fam.GetName() == name {
			return fam.GetMetric()
		}
	}
	return nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// errorOf returns the error object of a model response, checking the
// failure envelope around it: {"v":1,"ok":false,"error":{...}} plus
// "partialSideEffects":true exactly when the call may have done something.
func errorOf(t *testing.T, out orchestrator.Outcome) map[string]any {
	t.Helper()
	e, ok := out.Response["error"].(map[string]any)
	partial, hasPartial := out.Response["partialSideEffects"]
	want := 3
	if hasPartial {
		want++
	}
	// A tool's own error carries the untrusted marker (its message may be
	// the tool's text); the pipeline's refusals do not.
	if mark, fenced := out.Response[orchestrator.UntrustedMarker]; fenced {
		if mark != true || out.Refused {
			t.Fatalf("response = %#v: the untrusted marker is true, and only on a tool's own answer", out.Response)
		}
		want++
	}
	if !ok || out.Response["v"] != 1 || out.Response["ok"] != false || len(out.Response) != want ||
		(hasPartial && partial != true) || hasPartial != out.Envelope.Error.PartialSideEffects {
		t.Fatalf("response = %#v, want {\"v\":1,\"ok\":false,\"error\":{...}} with partialSideEffects only when true", out.Response)
	}
	if _, coded := e["code"]; len(e) != 3 && !(coded && len(e) == 4) {
		t.Fatalf("error = %#v, want exactly type, message, retryable (and a code when there is one)", e)
	}
	return e
}
