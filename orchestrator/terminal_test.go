package orchestrator_test

import (
	"reflect"
	"testing"

	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
)

// Terminal tools, finish and intent collection (DESIGN §6 step 11 and
// "Terminal tools").

func textTurn(f *fixture) *orchestrator.Turn {
	return f.orch.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeText}, 1, nil)
}

// wantEnd checks the turn's end: its reason, its exact text, and the call
// that ended it.
func wantEnd(t *testing.T, tr *orchestrator.Turn, want orchestrator.End) {
	t.Helper()
	got, ok := tr.Terminated()
	if !ok || got != want {
		t.Errorf("End() = %+v, %v; want %+v, true", got, ok, want)
	}
}

func TestTerminalToolSuccessEndsTheTurnWithItsText(t *testing.T) {
	f := newFixture(t)
	tr := textTurn(f)
	if _, ended := tr.Terminated(); ended {
		t.Fatal("a fresh turn has ended")
	}
	o := handleOne(t, tr, call("h", "hang_up", map[string]any{"text": "Goodbye, and thanks for calling."}), nil)
	if !o.Envelope.OK {
		t.Fatalf("hang_up: %+v", o.Envelope)
	}
	wantEnd(t, tr, orchestrator.End{Reason: protocol.ReasonTerminalTool, Text: "Goodbye, and thanks for calling.", CallID: "h"})
}

func TestFinishEndsTheTurnWithItsNoteOrFinished(t *testing.T) {
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"note": "Order 42 shipped."}, "Order 42 shipped."},
		{map[string]any{}, "Finished"},
		{nil, "Finished"},
	} {
		f := newFixture(t)
		tr := textTurn(f)
		o := handleOne(t, tr, call("f", finishTool, tc.args), nil)
		if !o.Envelope.OK {
			t.Fatalf("finish(%v): %+v", tc.args, o.Envelope)
		}
		wantEnd(t, tr, orchestrator.End{Reason: protocol.ReasonFinish, Text: tc.want, CallID: "f"})
	}
}

func TestSecondTerminalCallInOneMessageIsAConflictAndNeverRuns(t *testing.T) {
	for _, second := range []orchestrator.Call{
		call("second", "hang_up", map[string]any{"text": "Bye again."}),
		call("second", finishTool, map[string]any{"note": "Bye again."}),
	} {
		t.Run(second.Name, func(t *testing.T) {
			f := newFixture(t)
			tr := textTurn(f)
			res := tr.Handle(t.Context(), []orchestrator.Call{
				call("first", "hang_up", map[string]any{"text": "Bye."}), second,
			}, nil)
			if !res[0].Outcome.Envelope.OK {
				t.Fatalf("first terminal call: %+v", res[0].Outcome.Envelope)
			}
			if errType(res[1].Outcome) != tools.ErrConflict || !res[1].Outcome.Refused || !res[1].Send {
				t.Fatalf("second terminal call: %+v, want a CONFLICT refusal", res[1].Outcome.Envelope)
			}
			if got := f.runs("hang_up") + f.runs(finishTool); got != 1 {
				t.Errorf("terminal handlers ran %d times, want 1", got)
			}
			wantEnd(t, tr, orchestrator.End{Reason: protocol.ReasonTerminalTool, Text: "Bye.", CallID: "first"})
		})
	}
}

func TestTerminalCallAfterTheTurnEndedIsAConflict(t *testing.T) {
	f := newFixture(t)
	tr := textTurn(f)
	handleOne(t, tr, call("f", finishTool, map[string]any{"note": "Done."}), nil)
	o := handleOne(t, tr, call("h", "hang_up", map[string]any{"text": "Bye."}), nil)
	if errType(o) != tools.ErrConflict || f.runs("hang_up") != 0 {
		t.Errorf("terminal call after finish: %+v (ran %d), want CONFLICT, not run", o.Envelope, f.runs("hang_up"))
	}
	wantEnd(t, tr, orchestrator.End{Reason: protocol.ReasonFinish, Text: "Done.", CallID: "f"})
	// Other tools are still answered normally.
	if o := handleOne(t, tr, call("e", "echo", map[string]any{"text": "hi"}), nil); !o.Envelope.OK {
		t.Errorf("echo after the end: %+v", o.Envelope)
	}
}

func TestFailedTerminalCallLetsTheTurnContinue(t *testing.T) {
	f := newFixture(t)
	tr := textTurn(f)
	o := handleOne(t, tr, call("h1", "hang_up", map[string]any{"text": "fail"}), nil)
	if errType(o) != tools.ErrPermanent {
		t.Fatalf("failing terminal call: %+v, want PERMANENT", o.Envelope)
	}
	if end, ok := tr.Terminated(); ok {
		t.Fatalf("End() = %+v after a failed terminal call, want the turn to go on", end)
	}
	if got := tr.Intents(); len(got) != 0 {
		t.Errorf("Intents() = %+v, want none from a failed call", got)
	}
	if o := handleOne(t, tr, call("h2", "hang_up", map[string]any{"text": "Bye now."}), nil); !o.Envelope.OK {
		t.Fatalf("later terminal call: %+v", o.Envelope)
	}
	wantEnd(t, tr, orchestrator.End{Reason: protocol.ReasonTerminalTool, Text: "Bye now.", CallID: "h2"})
}

func TestRefusedTerminalCallLetsALaterOneSucceed(t *testing.T) {
	f := newFixture(t)
	tr := textTurn(f)
	// Refused by validation after the terminal slot was reserved.
	if o := handleOne(t, tr, call("bad", "hang_up", map[string]any{"text": 7}), nil); errType(o) != tools.ErrValidation {
		t.Fatalf("invalid terminal call: %+v, want VALIDATION", o.Envelope)
	}
	if o := handleOne(t, tr, call("good", "hang_up", map[string]any{"text": "Bye."}), nil); !o.Envelope.OK {
		t.Fatalf("valid terminal call: %+v", o.Envelope)
	}
	wantEnd(t, tr, orchestrator.End{Reason: protocol.ReasonTerminalTool, Text: "Bye.", CallID: "good"})
}

func TestIntentsOfSuccessfulCallsAreCollected(t *testing.T) {
	f := newFixture(t)
	tr := f.orch.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeVoice}, 1, nil)
	handleOne(t, tr, call("g", "good_intent", nil), nil)
	handleOne(t, tr, call("x", "rate_limited", nil), nil)
	handleOne(t, tr, call("h", "hang_up", map[string]any{"text": "Bye."}), nil)
	want := []intents.Intent{
		{Type: intents.EndVoiceSession, Reason: "user said bye"},
		{Type: intents.SetPendingMessage, Message: "call ended"},
	}
	if got := tr.Intents(); !reflect.DeepEqual(got, want) {
		t.Errorf("Intents() = %+v, want %+v", got, want)
	}
	// Intents returns a copy.
	tr.Intents()[0].Reason = "changed"
	if got := tr.Intents()[0].Reason; got != "user said bye" {
		t.Errorf("Intents() aliases the turn's state: reason now %q", got)
	}
}
