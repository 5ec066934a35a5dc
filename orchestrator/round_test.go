package orchestrator_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/transport"
)

// The rules both loops share, through Round.

func TestRoundGivesCallsWithoutAnIDOneUniqueInTheSession(t *testing.T) {
	f := newFixture(t)
	tr := textTurn(f)
	seen := map[string]bool{}
	for range 2 {
		rd := tr.Round(t.Context(), []transport.FunctionCall{{Name: "noop"}, {Name: "noop"}}, nil)
		if len(rd.Responses) != 2 {
			t.Fatalf("responses %+v, want two", rd.Responses)
		}
		for i, c := range rd.Calls {
			if c.ID == "" || !c.Synthetic || seen[c.ID] || rd.Responses[i].ID != c.ID {
				t.Errorf("call %+v (response %s): want a fresh synthetic ID answered under it", c, rd.Responses[i].ID)
			}
			seen[c.ID] = true
		}
	}
}

func TestTerminalResultInVoiceEndsTheTurnAndTellsTheModelNotToAdd(t *testing.T) {
	f := newFixture(t)
	tr := f.orch.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeVoice}, 1, nil)
	rd := tr.Round(t.Context(), []transport.FunctionCall{{ID: "h", Name: "hang_up", Args: map[string]any{"text": "Goodbye."}}}, nil)
	if rd.End == nil || rd.End.Text != "Goodbye." || rd.End.Reason != protocol.ReasonTerminalTool {
		t.Fatalf("end %+v, want the terminal text", rd.End)
	}
	if got := rd.Responses[0].Response["instruction"]; got != orchestrator.TerminalNote {
		t.Errorf("instruction %v, want the terminal note", got)
	}
	// In text the model is not called again, so it needs no note.
	text := textTurn(f)
	rd = text.Round(t.Context(), []transport.FunctionCall{{ID: "h", Name: "hang_up", Args: map[string]any{"text": "Bye."}}}, nil)
	if _, ok := rd.Responses[0].Response["instruction"]; ok || rd.End == nil {
		t.Errorf("text: response %v, end %+v; want the plain result and the turn ended", rd.Responses[0].Response, rd.End)
	}
}

func TestModeChangeWinsOverATerminalResult(t *testing.T) {
	f := newFixture(t)
	tr := f.orch.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeVoice}, 1, nil)
	rd := tr.Round(t.Context(), []transport.FunctionCall{
		{ID: "bye", Name: "good_intent"},
		{ID: "h", Name: "hang_up", Args: map[string]any{"text": "Goodbye."}},
	}, nil)
	if rd.End != nil || !rd.ModeChange {
		t.Fatalf("end %+v, mode change %v; want the switch to win", rd.End, rd.ModeChange)
	}
	for _, r := range rd.Responses {
		if _, ok := r.Response["instruction"]; ok {
			t.Errorf("%s carries a terminal instruction although the mode change won", r.ID)
		}
	}
	if !slices.ContainsFunc(rd.Intents, func(in intents.Intent) bool { return in.Type == intents.EndVoiceSession }) {
		t.Errorf("intents %+v, want END_VOICE_SESSION among them", rd.Intents)
	}
}

func TestRoundIntentsAreOnlyThatRoundsIntents(t *testing.T) {
	f := newFixture(t)
	tr := f.orch.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeVoice}, 1, nil)
	first := tr.Round(t.Context(), []transport.FunctionCall{{ID: "a", Name: "good_intent"}}, nil)
	second := tr.Round(t.Context(), []transport.FunctionCall{{ID: "b", Name: "noop"}}, nil)
	if len(first.Intents) != 1 || len(second.Intents) != 0 {
		t.Errorf("intents %+v then %+v; an intent must be applied once", first.Intents, second.Intents)
	}
}

func TestUnknownErrorTypeBecomesInternalWithItsMessage(t *testing.T) {
	f := newFixture(t)
	out := f.exec(t.Context(), "fail_weird", nil)
	e := errorOf(t, out)
	if e["type"] != "INTERNAL" || e["message"] != "an error type nobody knows" {
		t.Errorf("error %v, want INTERNAL with the handler's message", e)
	}
}

func TestOutcomeShowsOnlyAllowListedResultFields(t *testing.T) {
	f := newFixture(t)
	if out := f.exec(t.Context(), "profile", nil); !reflect.DeepEqual(out.Shown, map[string]any{"name": "Ada", "plan": "pro"}) {
		t.Errorf("shown %v, want name and plan only", out.Shown)
	}
	for _, name := range []string{"echo", "no_such_tool"} {
		if out := f.exec(t.Context(), name, map[string]any{"text": "x"}); out.Shown != nil {
			t.Errorf("%s: shown %v, want nothing (no allow-list, or refused)", name, out.Shown)
		}
	}
}

// Arguments that did not parse are never run: the model is told, with a
// code it can act on, and the turn goes on.
func TestCallWithUnreadableArgumentsIsFedBackAndNeverRuns(t *testing.T) {
	f := newFixture(t)
	ev := &events{}
	rd := textTurn(f).Round(t.Context(), []transport.FunctionCall{
		{ID: "bad", Name: "noop", ArgsError: "unexpected end of JSON input"}}, ev)
	if f.runs("noop") != 0 {
		t.Fatal("a call with unreadable arguments ran")
	}
	e := errorOf(t, rd.Results[0].Outcome)
	if e["type"] != "VALIDATION" || e["code"] != orchestrator.InvalidJSON || e["message"] != "Invalid tool arguments JSON" {
		t.Errorf("error %v, want VALIDATION invalid_json", e)
	}
	if len(rd.Responses) != 1 || rd.Responses[0].ID != "bad" {
		t.Errorf("responses %+v, want the call answered under its ID", rd.Responses)
	}
}

// The spec's "p95 response size > 1500 → logged as warning": a tool's
// large result among small ones is not logged; once its p95 is over the
// line it is, once per tool and minute however often it comes.
func TestToolWhoseP95SizeIsOverTheWarningIsLoggedOncePerMinute(t *testing.T) {
	const warning = "tool result size p95 over the size warning"
	f := newFixture(t)
	long := map[string]any{"text": strings.Repeat("x", 2000)}
	for range 20 {
		f.exec(t.Context(), "echo", map[string]any{"text": "short"})
	}
	f.exec(t.Context(), "echo", long)
	if strings.Contains(f.log.String(), warning) {
		t.Fatalf("one large result among 21 was warned about:\n%s", f.log.String())
	}
	for range 5 {
		f.exec(t.Context(), "echo", long)
	}
	if n := strings.Count(f.log.String(), warning); n != 1 {
		t.Errorf("%d warnings once the p95 is over the line, want 1", n)
	}
}

// The warning's 1500 is characters, as the seed's "1500 chars": a tool
// whose results are 800 CJK characters (2 400 bytes) is well under it.
func TestNonASCIIResultsUnderTheWarningInCharactersAreNotWarnedAbout(t *testing.T) {
	f := newFixture(t)
	for range 10 {
		f.exec(t.Context(), "echo", map[string]any{"text": strings.Repeat("日本", 400)})
	}
	if strings.Contains(f.log.String(), "tool result size p95 over the size warning") {
		t.Errorf("results of about 850 characters were warned about:\n%s", f.log.String())
	}
	sizes := f.m.Summary.Snapshot().ResponseSizes["echo"]
	if sizes.OverWarning || sizes.P95 < 800 || sizes.P95 > 1000 {
		t.Errorf("responseSizes = %+v, want a p95 of about 850 characters, not over the warning", sizes)
	}
}
