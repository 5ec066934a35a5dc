package orchestrator_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
)

// The remaining pipeline steps through NewTurn and Handle: lookup, mode
// restriction, validation, shaping and the soft latency budget.

func TestTurnStampsCallsWithTheSession(t *testing.T) {
	f := newFixture(t)
	ev := &events{}
	tr := f.orch.NewTurn(orchestrator.Session{ID: "sess-9", UserID: "user-9", Mode: tools.ModeVoice}, 7, nil)
	res := tr.Handle(t.Context(), []orchestrator.Call{{ID: "c", Name: "echo", Args: map[string]any{"text": "hi", "secret": "pin 1234"},
		SessionID: "forged", UserID: "forged", Mode: tools.ModeText, Turn: 99}}, ev)
	want := orchestrator.Call{ID: "c", Name: "echo", Args: res[0].Call.Args, SessionID: "sess-9", UserID: "user-9", Mode: "voice", Turn: 7}
	if c := res[0].Call; c.SessionID != want.SessionID || c.UserID != want.UserID || c.Mode != want.Mode || c.Turn != want.Turn {
		t.Errorf("result call %+v, want the turn's session, user, mode and number", c)
	}
	if len(ev.received) != 1 || ev.redacted[0]["secret"] != tools.Redacted || ev.redacted[0]["text"] != "hi" {
		t.Errorf("CallReceived args %+v, want secret redacted and text shown", ev.redacted)
	}
	if len(ev.finished) != 1 || ev.finished[0].Response["output"] == nil {
		t.Errorf("CallFinished %+v, want the outcome", ev.finished)
	}
}

func TestPreExecutionRefusalsNeverRunTheHandler(t *testing.T) {
	cases := []struct {
		name string
		mode protocol.Mode
		c    orchestrator.Call
		want tools.ErrorType
		ran  string
	}{
		{"unknown tool", tools.ModeText, call("c", "drop_tables", map[string]any{"confirm": true}), tools.ErrNotFound, ""},
		{"voice-only tool in text", tools.ModeText, call("c", "voice_only", nil), tools.ErrModeRestricted, "voice_only"},
		{"missing argument", tools.ModeText, call("c", "echo", map[string]any{}), tools.ErrValidation, "echo"},
		{"wrong type", tools.ModeVoice, call("c", "search", map[string]any{"query": "x", "limit": "ten"}), tools.ErrValidation, "search"},
		{"out of range", tools.ModeText, call("c", "search", map[string]any{"query": "x", "limit": 51}), tools.ErrValidation, "search"},
		{"extra property", tools.ModeText, call("c", "hang_up", map[string]any{"text": "bye", "loud": true}), tools.ErrValidation, "hang_up"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tr := f.orch.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tc.mode}, 1, nil)
			o := handleOne(t, tr, tc.c, nil)
			if errType(o) != tc.want || !o.Refused || o.Envelope.Error.PartialSideEffects {
				t.Fatalf("outcome %+v refused %v, want a %s refusal without side effects", o.Envelope, o.Refused, tc.want)
			}
			if tc.ran != "" && f.runs(tc.ran) != 0 {
				t.Errorf("%s ran %d times", tc.ran, f.runs(tc.ran))
			}
			if tc.c.Name == "hang_up" {
				if end, ok := tr.Terminated(); ok {
					t.Errorf("End() = %+v after a refused terminal call", end)
				}
			}
		})
	}
}

func TestModeRestrictionDoesNotCountAgainstTheGates(t *testing.T) {
	f := newFixture(t)
	tr := f.orch.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeText}, 1, nil)
	tr.Handle(t.Context(), []orchestrator.Call{call("a", "voice_only", nil), call("b", "nope", nil)}, nil)
	if got := tr.Calls(); got != 0 {
		t.Errorf("Calls() = %d after only restricted and unknown calls, want 0", got)
	}
}

func TestHugeResultIsShapedToTheBudget(t *testing.T) {
	for _, name := range []string{"huge", "huge_list"} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			o := handleOne(t, textTurn(f), call("c", name, nil), nil)
			if !o.Envelope.OK || !o.Envelope.Meta.Truncated {
				t.Fatalf("outcome %+v, want ok and meta.truncated", o.Envelope.Meta)
			}
			if n := len(responseJSON(t, o)); n > orchestrator.DefaultMaxResultBytes {
				t.Errorf("model response is %d bytes, want at most %d", n, orchestrator.DefaultMaxResultBytes)
			}
		})
	}
}

func TestSmallResultIsNotMarkedTruncated(t *testing.T) {
	f := newFixture(t)
	o := handleOne(t, textTurn(f), call("c", "echo", map[string]any{"text": "hi"}), nil)
	if !o.Envelope.OK || o.Envelope.Meta.Truncated {
		t.Errorf("meta %+v, want not truncated", o.Envelope.Meta)
	}
}

func TestCustomResultBudgetBoundsTheResponse(t *testing.T) {
	f := newFixture(t)
	o := f.with(orchestrator.Config{MaxResultBytes: 1000}, orchestrator.Deps{})
	tr := o.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeText}, 1, nil)
	out := handleOne(t, tr, call("c", "huge_list", nil), nil)
	if n := len(responseJSON(t, out)); !out.Envelope.Meta.Truncated || n > 1000 {
		t.Errorf("response %d bytes, truncated %v; want at most 1000 and truncated", n, out.Envelope.Meta.Truncated)
	}
}

func TestVoiceResultIsCompactPlainText(t *testing.T) {
	f := newFixture(t)
	tr := f.orch.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeVoice}, 1, nil)
	for _, name := range []string{"huge_list", "echo"} {
		args := map[string]any(nil)
		if name == "echo" {
			args = map[string]any{"text": "It is sunny"}
		}
		o := handleOne(t, tr, call(name, name, args), nil)
		text, ok := o.Response["output"].(string)
		if !ok {
			t.Fatalf("%s: voice output %T, want plain text", name, o.Response["output"])
		}
		if strings.ContainsAny(text, "{}[]\"") || len(text) > orchestrator.PlainTextMaxBytes {
			t.Errorf("%s: voice output %q (%d bytes), want no JSON punctuation and at most %d bytes",
				name, text[:min(len(text), 200)], len(text), orchestrator.PlainTextMaxBytes)
		}
		if name == "echo" && !strings.Contains(text, "It is sunny") {
			t.Errorf("echo: voice output %q, want the text in it", text)
		}
	}
}

func TestSlowRetrievalIsCountedButAnswered(t *testing.T) {
	f := newFixture(t)
	o := handleOne(t, textTurn(f), call("c", "slow_search", nil), nil)
	if !o.Envelope.OK || o.Duration < slowSearchSleep {
		t.Fatalf("outcome %+v after %v, want ok after at least %v", o.Envelope, o.Duration, slowSearchSleep)
	}
	if got := testutil.ToFloat64(f.m.SoftLatencyExceeded.WithLabelValues("slow_search", "text")); got != 1 {
		t.Errorf("soft_latency_exceeded{slow_search,text} = %v, want 1", got)
	}
	if !f.log.Contains("soft latency budget") {
		t.Error("no warning logged for the slow call")
	}
}

func TestSoftLatencyBudgetFollowsTheSessionMode(t *testing.T) {
	f := newFixture(t)
	voice := f.orch.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeVoice}, 1, nil)
	handleOne(t, voice, call("v", "voice_search", nil), nil)
	handleOne(t, voice, call("u", "sleepy", map[string]any{"ms": 2}), nil)
	text := f.orch.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeText}, 2, nil)
	handleOne(t, text, call("t", "voice_search", nil), nil)

	for _, tc := range []struct {
		tool, mode string
		want       float64
	}{{"voice_search", "voice", 1}, {"sleepy", "voice", 0}, {"voice_search", "text", 0}} {
		if got := testutil.ToFloat64(f.m.SoftLatencyExceeded.WithLabelValues(tc.tool, tc.mode)); got != tc.want {
			t.Errorf("soft_latency_exceeded{%s,%s} = %v, want %v", tc.tool, tc.mode, got, tc.want)
		}
	}
}

// steppingClock returns a clock that moves on by step at every reading:
// each call the orchestrator times takes exactly step.
func steppingClock(step time.Duration) func() time.Time {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(step)
		return now
	}
}

// In voice every tool has a soft budget of at most 1 s, whatever its
// category: a utility or action tool taking longer is counted and logged
// like a slow retrieval; in text only retrieval tools have one.
func TestEveryVoiceToolOverASecondIsCountedAndLogged(t *testing.T) {
	f := newFixture(t)
	o := f.with(orchestrator.Config{Now: steppingClock(1200 * time.Millisecond)}, orchestrator.Deps{})
	voice := o.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeVoice}, 1, nil)
	text := o.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeText}, 2, nil)
	for _, name := range []string{"noop", "hang_up"} { // utility, action
		args := map[string]any{}
		if name == "hang_up" {
			args["text"] = "Bye."
		}
		if o := handleOne(t, voice, call("v-"+name, name, args), nil); !o.Envelope.OK || o.Duration != 1200*time.Millisecond {
			t.Fatalf("%s in voice: %+v after %v", name, o.Envelope, o.Duration)
		}
		handleOne(t, text, call("t-"+name, name, args), nil)
		if got := testutil.ToFloat64(f.m.SoftLatencyExceeded.WithLabelValues(name, "voice")); got != 1 {
			t.Errorf("soft_latency_exceeded{%s,voice} = %v, want 1", name, got)
		}
		if got := testutil.ToFloat64(f.m.SoftLatencyExceeded.WithLabelValues(name, "text")); got != 0 {
			t.Errorf("soft_latency_exceeded{%s,text} = %v, want 0 (no budget in text)", name, got)
		}
	}
	if !f.log.Contains("soft latency budget") {
		t.Error("no warning logged for the slow voice calls")
	}
}
