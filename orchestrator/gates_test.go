package orchestrator_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
)

// Per-turn gates (DESIGN §6 step 3), driven through NewTurn and Handle.

// searches returns n search calls with distinct arguments, so loop
// detection stays out of the way, numbered from first.
func searches(first, n int) []orchestrator.Call {
	out := make([]orchestrator.Call, n)
	for i := range out {
		id := first + i
		out[i] = call(fmt.Sprintf("s%d", id), "search", map[string]any{"query": fmt.Sprintf("topic %d", id)})
	}
	return out
}

// utilities returns n echo calls (a utility tool) with distinct arguments.
func utilities(first, n int) []orchestrator.Call {
	out := make([]orchestrator.Call, n)
	for i := range out {
		id := first + i
		out[i] = call(fmt.Sprintf("u%d", id), "echo", map[string]any{"text": fmt.Sprintf("line %d", id)})
	}
	return out
}

// wantGate checks one result against the gate verdict expected for it:
// "" for a call that ran, else the gate that refused it.
func wantGate(t *testing.T, r orchestrator.Result, gate string, mode protocol.Mode, limit int) {
	t.Helper()
	if gate == "" {
		if !r.Outcome.Envelope.OK {
			t.Errorf("%s (%s): %+v, want it run", r.Call.ID, r.Call.Name, r.Outcome.Envelope.Error)
		}
		return
	}
	if errType(r.Outcome) != tools.ErrBudgetExceeded || !r.Outcome.Refused || !r.Send {
		t.Fatalf("%s (%s): outcome %+v refused %v send %v, want a BUDGET_EXCEEDED refusal to send",
			r.Call.ID, r.Call.Name, r.Outcome.Envelope, r.Outcome.Refused, r.Send)
	}
	msg := r.Outcome.Envelope.Error.Message
	what := "tool calls"
	if gate == "retrieval" {
		what = "retrieval calls"
	}
	if !strings.Contains(msg, fmt.Sprintf("%d %s", limit, what)) || !strings.Contains(msg, string(mode)) {
		t.Errorf("%s: message %q, want it to name the limit of %d %s in %s mode", r.Call.ID, msg, limit, what, mode)
	}
	if r.Outcome.Envelope.Error.Retryable || r.Outcome.Envelope.Error.PartialSideEffects {
		t.Errorf("%s: error %+v, want not retryable and no side effects", r.Call.ID, *r.Outcome.Envelope.Error)
	}
}

func TestGatesInTextModeCountAcrossMessagesOfOneTurn(t *testing.T) {
	f := newFixture(t)
	tr := f.orch.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeText}, 1, nil)

	// Retrieval: 2 + 3 run, the sixth is refused by the retrieval gate.
	for _, r := range tr.Handle(t.Context(), searches(1, 2), nil) {
		wantGate(t, r, "", "text", 0)
	}
	res := tr.Handle(t.Context(), searches(3, 4), nil)
	for i, gate := range []string{"", "", "", "retrieval"} {
		wantGate(t, res[i], gate, "text", 5)
	}
	if got := f.runs("search"); got != 5 {
		t.Errorf("search ran %d times, want 5 (the refused call never runs)", got)
	}
	// Utility calls still fit until ten calls in all were let through.
	res = tr.Handle(t.Context(), utilities(1, 6), nil)
	for i, gate := range []string{"", "", "", "", "", "total"} {
		wantGate(t, res[i], gate, "text", 10)
	}
	// The total gate comes first for a retrieval call too.
	wantGate(t, tr.Handle(t.Context(), searches(20, 1), nil)[0], "total", "text", 10)

	if got := tr.Calls(); got != 10 {
		t.Errorf("Calls() = %d, want 10", got)
	}
	if got := f.runs("echo"); got != 5 {
		t.Errorf("echo ran %d times, want 5", got)
	}
	if got := testutil.ToFloat64(f.m.GateRefusals.WithLabelValues("retrieval", "text")); got != 1 {
		t.Errorf("gate_refusals{retrieval,text} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(f.m.GateRefusals.WithLabelValues("total", "text")); got != 2 {
		t.Errorf("gate_refusals{total,text} = %v, want 2", got)
	}
	if got := testutil.ToFloat64(f.m.ToolCalls.WithLabelValues("search", "budget_exceeded", "browser")); got != 2 {
		t.Errorf("tool_calls{search,budget_exceeded} = %v, want 2", got)
	}
}

func TestGatesInVoiceModeRefuseThirdRetrievalAndFourthCall(t *testing.T) {
	f := newFixture(t)
	tr := f.orch.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeVoice}, 1, nil)

	res := tr.Handle(t.Context(), searches(1, 3), nil)
	for i, gate := range []string{"", "", "retrieval"} {
		wantGate(t, res[i], gate, "voice", 2)
	}
	wantGate(t, tr.Handle(t.Context(), utilities(1, 1), nil)[0], "", "voice", 0)
	wantGate(t, tr.Handle(t.Context(), utilities(2, 1), nil)[0], "total", "voice", 3)

	if got := f.runs("search") + f.runs("echo"); got != 3 {
		t.Errorf("handlers ran %d times, want 3", got)
	}
	for gate, want := range map[string]float64{"retrieval": 1, "total": 1} {
		if got := testutil.ToFloat64(f.m.GateRefusals.WithLabelValues(gate, "voice")); got != want {
			t.Errorf("gate_refusals{%s,voice} = %v, want %v", gate, got, want)
		}
	}
	if got := testutil.ToFloat64(f.m.GateRefusals.WithLabelValues("retrieval", "text")); got != 0 {
		t.Errorf("gate_refusals{retrieval,text} = %v, want 0 in a voice turn", got)
	}
}

func TestGatesCountParallelCallsInArrivalOrder(t *testing.T) {
	for _, mode := range []protocol.Mode{tools.ModeText, tools.ModeVoice} {
		t.Run(string(mode), func(t *testing.T) {
			f := newFixture(t)
			tr := f.orch.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: mode}, 1, nil)
			limit := map[protocol.Mode]orchestrator.Budget{"text": {MaxRetrieval: 5, MaxCalls: 10}, "voice": {MaxRetrieval: 2, MaxCalls: 3}}[mode]

			// A retrieval flood in one message: the first MaxRetrieval
			// in arrival order run, the rest are refused, whichever
			// handler would have finished first.
			calls := searches(1, limit.MaxRetrieval+3)
			res := tr.Handle(t.Context(), calls, nil)
			for i, r := range res {
				if r.Call.ID != calls[i].ID {
					t.Fatalf("result %d is %s, want results in the calls' order", i, r.Call.ID)
				}
				gate := ""
				if i >= limit.MaxRetrieval {
					gate = "retrieval"
				}
				wantGate(t, r, gate, mode, limit.MaxRetrieval)
			}
			// Then a mixed message fills the total gate in order.
			left := limit.MaxCalls - limit.MaxRetrieval
			mixed := append(utilities(1, left), searches(50, 1)...)
			mixed = append(mixed, utilities(100, 1)...)
			res = tr.Handle(t.Context(), mixed, nil)
			for i, r := range res {
				gate := ""
				if i >= left {
					gate = "total"
				}
				wantGate(t, r, gate, mode, limit.MaxCalls)
			}
			if got := f.runs("search"); got != int64(limit.MaxRetrieval) {
				t.Errorf("search ran %d times, want %d", got, limit.MaxRetrieval)
			}
		})
	}
}

func TestGatesResetForANewTurn(t *testing.T) {
	f := newFixture(t)
	s := orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeVoice}
	first := f.orch.NewTurn(s, 1, nil)
	first.Handle(t.Context(), utilities(1, 4), nil)
	if got := first.Calls(); got != 3 {
		t.Fatalf("first turn Calls() = %d, want 3", got)
	}
	second := f.orch.NewTurn(s, 2, nil)
	for _, r := range second.Handle(t.Context(), append(searches(1, 2), utilities(10, 1)...), nil) {
		wantGate(t, r, "", "voice", 0)
	}
	// The old turn keeps its own count: its gate is still shut.
	wantGate(t, first.Handle(t.Context(), utilities(20, 1), nil)[0], "total", "voice", 3)
}

func TestCustomBudgetsApplyPerMode(t *testing.T) {
	f := newFixture(t)
	o := f.with(orchestrator.Config{Budgets: orchestrator.Budgets{
		Text:  orchestrator.Budget{MaxRetrieval: 1, MaxCalls: 2},
		Voice: orchestrator.Budget{MaxRetrieval: 3, MaxCalls: 4},
	}}, orchestrator.Deps{})
	if got := o.Config().Text; got != (orchestrator.Budget{MaxRetrieval: 1, MaxCalls: 2}) {
		t.Fatalf("Config().Text = %+v", got)
	}

	text := o.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeText}, 1, nil)
	res := text.Handle(t.Context(), append(searches(1, 2), utilities(1, 2)...), nil)
	for i, gate := range []string{"", "retrieval", "", "total"} {
		wantGate(t, res[i], gate, "text", map[string]int{"": 0, "retrieval": 1, "total": 2}[gate])
	}

	voice := o.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeVoice}, 2, nil)
	res = voice.Handle(t.Context(), append(searches(10, 4), utilities(10, 2)...), nil)
	for i, gate := range []string{"", "", "", "retrieval", "", "total"} {
		wantGate(t, res[i], gate, "voice", map[string]int{"": 0, "retrieval": 3, "total": 4}[gate])
	}
}

func TestDefaultBudgets(t *testing.T) {
	cfg := newFixture(t).orch.Config()
	if cfg.Text != (orchestrator.Budget{MaxRetrieval: 5, MaxCalls: 10}) || cfg.Voice != (orchestrator.Budget{MaxRetrieval: 2, MaxCalls: 3}) {
		t.Errorf("default budgets text %+v voice %+v, want 5/10 and 2/3", cfg.Text, cfg.Voice)
	}
}
