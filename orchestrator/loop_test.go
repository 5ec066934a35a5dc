package orchestrator_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/loopdetect"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/tools"
)

// Loop detection (DESIGN §6 step 4), driven through NewTurn and Handle.

const loopQuery = "zebra umbrella 4242"

// wantLoop checks that a call was refused as a loop, with feedback that
// steers away and does not echo the arguments.
func wantLoop(t *testing.T, o orchestrator.Outcome, echoed ...string) {
	t.Helper()
	if errType(o) != tools.ErrLoopDetected || !o.Refused {
		t.Fatalf("outcome %+v refused %v, want LOOP_DETECTED", o.Envelope, o.Refused)
	}
	resp := string(responseJSON(t, o))
	for _, s := range echoed {
		if strings.Contains(resp, s) {
			t.Errorf("loop feedback %s echoes the argument %q", resp, s)
		}
	}
	if !strings.Contains(o.Envelope.Error.Message, "search") {
		t.Errorf("feedback %q, want it to name the tool", o.Envelope.Error.Message)
	}
}

func TestThirdIdenticalCallIsALoopWhateverTheSpelling(t *testing.T) {
	f := newFixture(t)
	tr := f.orch.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeText}, 1, nil)
	spellings := []string{
		`{"query": "` + loopQuery + `", "limit": 3}`,
		`{ "limit" : 3.0 ,
		   "query":"` + loopQuery + `" }`,
		`{"limit":30e-1,"query":"` + loopQuery + `"}`,
	}
	for i, s := range spellings[:2] {
		if o := handleOne(t, tr, call("c"+string(rune('1'+i)), "search", jsonArgs(t, s)), nil); !o.Envelope.OK {
			t.Fatalf("call %d: %+v, want it run", i+1, o.Envelope)
		}
	}
	wantLoop(t, handleOne(t, tr, call("c3", "search", jsonArgs(t, spellings[2])), nil), loopQuery, "zebra")
	if got := f.runs("search"); got != 2 {
		t.Errorf("search ran %d times, want 2", got)
	}
	if got := testutil.ToFloat64(f.m.LoopDetections.WithLabelValues(string(loopdetect.RepeatedCall))); got != 1 {
		t.Errorf("loop_detections{repeated_call} = %v, want 1", got)
	}
	// Different arguments are still fine.
	if o := handleOne(t, tr, call("c4", "search", map[string]any{"query": loopQuery, "limit": 4}), nil); !o.Envelope.OK {
		t.Errorf("a call with other arguments: %+v, want it run", o.Envelope)
	}
	// A string's inner whitespace is part of the argument, not spelling.
	if o := handleOne(t, tr, call("c5", "search", map[string]any{"query": loopQuery + " ", "limit": 3}), nil); !o.Envelope.OK {
		t.Errorf("a call whose query differs by a space: %+v, want it run", o.Envelope)
	}
}

func TestThirdIdenticalCallInOneMessageIsALoop(t *testing.T) {
	f := newFixture(t)
	tr := f.orch.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeText}, 1, nil)
	args := map[string]any{"query": loopQuery}
	res := tr.Handle(t.Context(), []orchestrator.Call{
		call("a", "search", args), call("b", "search", args), call("c", "search", args),
	}, nil)
	if !res[0].Outcome.Envelope.OK || !res[1].Outcome.Envelope.OK {
		t.Fatalf("first two: %+v / %+v, want them run", res[0].Outcome.Envelope, res[1].Outcome.Envelope)
	}
	wantLoop(t, res[2].Outcome, loopQuery)
	if got := f.runs("search"); got != 2 {
		t.Errorf("search ran %d times, want 2", got)
	}
}

func TestRepeatingAnEmptySearchAfterTwoEmptyResultsIsALoopButNewTermsRun(t *testing.T) {
	f := newFixture(t)
	tr := f.orch.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeText}, 1, nil)
	for _, q := range []string{"nothing about zebras", "nothing about umbrellas"} {
		if o := handleOne(t, tr, call(q, "search", map[string]any{"query": q}), nil); !o.Envelope.OK {
			t.Fatalf("%q: %+v, want it run", q, o.Envelope)
		}
	}
	// Asking again for what came back empty is refused, in the spec's words...
	o := handleOne(t, tr, call("again", "search", map[string]any{"query": "nothing about zebras"}), nil)
	wantLoop(t, o, "zebras", "umbrellas")
	if msg := o.Envelope.Error.Message; !strings.Contains(msg, "Data may not exist. Try different search terms or a different tool.") {
		t.Errorf("feedback %q, want the spec's advice", msg)
	}
	if got := testutil.ToFloat64(f.m.LoopDetections.WithLabelValues(string(loopdetect.EmptyResults))); got != 1 {
		t.Errorf("loop_detections{empty_results} = %v, want 1", got)
	}
	// ...but different terms, which may find something, run.
	if o := handleOne(t, tr, call("third", "search", map[string]any{"query": "giraffes"}), nil); !o.Envelope.OK {
		t.Errorf("new search terms: %+v, want them run", o.Envelope)
	}
	if got := f.runs("search"); got != 3 {
		t.Errorf("search ran %d times, want 3", got)
	}
	// Another tool is not affected.
	if o := handleOne(t, tr, call("other", "lookup", map[string]any{"id": "doc-1"}), nil); !o.Envelope.OK {
		t.Errorf("another tool: %+v, want it run", o.Envelope)
	}
}

// In voice the budget is 2 retrieval calls: the loop check comes first, so
// a third identical call is refused as the loop it is (not as over budget),
// and a refused loop does not use up budget.
func TestLoopIsCheckedBeforeTheGatesAndUsesNoBudget(t *testing.T) {
	f := newFixture(t)
	tr := f.orch.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeVoice}, 1, nil)
	args := map[string]any{"query": loopQuery}
	res := tr.Handle(t.Context(), []orchestrator.Call{
		call("a", "search", args), call("b", "search", args), call("c", "search", args),
	}, nil)
	wantLoop(t, res[2].Outcome, loopQuery)
	if got := tr.Calls(); got != 2 {
		t.Errorf("the gates counted %d calls, want 2 (the loop is not counted)", got)
	}
	if got := testutil.ToFloat64(f.m.GateRefusals.WithLabelValues("retrieval", "voice")); got != 0 {
		t.Errorf("gate refusals %v, want none", got)
	}
}

func TestLoopHistoryIsPerTurnWithASharedDetector(t *testing.T) {
	f := newFixture(t)
	s := orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeText}
	loops := loopdetect.New(5)
	args := map[string]any{"query": loopQuery}

	first := f.orch.NewTurn(s, 1, loops)
	handleOne(t, first, call("a", "search", args), nil)
	handleOne(t, first, call("b", "search", args), nil)
	empty := map[string]any{"query": "nothing here"}
	handleOne(t, first, call("e1", "search", empty), nil)
	handleOne(t, first, call("e2", "search", map[string]any{"query": "nothing there"}), nil)

	second := f.orch.NewTurn(s, 2, loops)
	for _, id := range []string{"c", "d"} {
		if o := handleOne(t, second, call(id, "search", args), nil); !o.Envelope.OK {
			t.Fatalf("turn 2 call %s: %+v, want it run (loop history is per turn)", id, o.Envelope)
		}
	}
	wantLoop(t, handleOne(t, second, call("e", "search", args), nil), loopQuery)

	snap := loops.Snapshot()
	if len(snap) != 2 || snap[0].Turn != 1 || snap[1].Turn != 2 {
		t.Fatalf("shared history %+v, want turns 1 and 2", snap)
	}
	if got := snap[0].Tools[0]; got.Calls != 4 || got.EmptyResults != 2 {
		t.Errorf("turn 1 history %+v, want 4 calls and 2 empty results recorded in the shared detector", got)
	}
}
