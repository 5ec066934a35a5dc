package orchestrator_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/transport"
)

// Ending a turn at run time (tools.Terminate), the budget exemption of
// tools that end something, and what the pipeline strips from results.

// structResult is a typed result, as a Go tool may return one.
type structResult struct {
	Title string   `json:"title"`
	Tags  []string `json:"tags"`
}

// endingTools are the fixture's tools for these tests.
func endingTools() map[string]toolSpec {
	both := `"text","voice"`
	return map[string]toolSpec{
		// bail is an ordinary tool whose handler decides at run time to end
		// the turn with its note, after ms milliseconds.
		"bail": {modes: both, params: `"note": {"type": "string"}, "ms": {"type": "integer", "minimum": 0}`,
			handler: func(ctx context.Context, c tools.Call) tools.Envelope {
				var args struct {
					Note string
					Ms   int
				}
				_ = json.Unmarshal(c.Args, &args)
				select {
				case <-time.After(time.Duration(args.Ms) * time.Millisecond):
				case <-ctx.Done():
					return tools.Fail(tools.ErrTransient, "cancelled", true, false)
				}
				return tools.Terminate(args.Note)
			}},
		// goodbye ends a session (as end_voice_session does); it is not
		// sensitive, so that the budget tests see the budget alone (the
		// untrusted-output rule for such tools: untrusted_test.go).
		"goodbye": {category: "action", modes: both, extra: `"endsSession": true, "sensitive": false,`,
			handler: func(context.Context, tools.Call) tools.Envelope { return tools.OK("bye") }},
		"terminate_failed": {modes: both, handler: func(context.Context, tools.Call) tools.Envelope {
			env := tools.Fail(tools.ErrPermanent, "no", false, false)
			env.Terminate = &tools.Termination{Note: "x"}
			return env
		}},
		"terminate_with_data": {modes: both, handler: func(context.Context, tools.Call) tools.Envelope {
			env := tools.Terminate("done")
			env.Data = map[string]any{"also": "this"}
			return env
		}},
		// dirty returns control characters everywhere a handler can.
		"dirty": {modes: both, shown: `"title"`, params: `"kind": {"type": "string"}`,
			handler: func(_ context.Context, c tools.Call) tools.Envelope {
				var args struct{ Kind string }
				_ = json.Unmarshal(c.Args, &args)
				switch args.Kind {
				case "error":
					return tools.Fail(tools.ErrPermanent, "bad\x00 news\x1b", false, false)
				case "struct":
					return tools.OK(structResult{Title: "a\x07b", Tags: []string{"c\x7fd"}})
				case "terminate":
					return tools.Terminate("bye\x00 now", intents.Intent{Type: intents.SetPendingMessage, Message: "m\x01"})
				case "keys":
					return tools.OK(map[string]any{"ti\x00tle": "Order 42", "rows": []any{map[string]any{"de\x1b[2Jep": "x"}},
						"n\u0085": 1, "n": 2})
				}
				return tools.OK(map[string]any{"title": "Order\x00 42\u0085", "n": 3,
					"rows": []any{"keep\ttab\nline", map[string]any{"deep": "x\x1by"}}, "list": []string{"\x02z"}})
			}},
	}
}

func TestHandlerTerminationEndsTheTurnWithItsNoteOrFinished(t *testing.T) {
	for _, tc := range []struct{ note, want string }{{"Refund issued.", "Refund issued."}, {"", "Finished"}} {
		f := newFixture(t)
		tr := textTurn(f)
		rd := tr.Round(t.Context(), []transport.FunctionCall{{ID: "b", Name: "bail", Args: map[string]any{"note": tc.note}}}, nil)
		want := orchestrator.End{Reason: protocol.ReasonFinish, Text: tc.want, CallID: "b"}
		if rd.End == nil || *rd.End != want {
			t.Fatalf("note %q: end %+v, want %+v", tc.note, rd.End, want)
		}
		wantEnd(t, tr, want)
		if len(rd.Responses) != 1 || rd.Responses[0].Response["output"] != tc.want || rd.Responses[0].Response["ok"] != true {
			t.Errorf("note %q: responses %+v, want the call answered with %q", tc.note, rd.Responses, tc.want)
		}
	}
}

func TestHandlerTerminationInVoiceTellsTheModelNotToAdd(t *testing.T) {
	f := newFixture(t)
	tr := f.orch.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeVoice}, 1, nil)
	rd := tr.Round(t.Context(), []transport.FunctionCall{{ID: "b", Name: "bail", Args: map[string]any{"note": "Bye."}}}, nil)
	if rd.End == nil || rd.End.Text != "Bye." || rd.End.Reason != protocol.ReasonFinish {
		t.Fatalf("end %+v", rd.End)
	}
	if r := rd.Responses[0].Response; r["output"] != "Bye." || r["instruction"] != orchestrator.TerminalNote {
		t.Errorf("response %v, want the note with the terminal instruction", r)
	}
}

func TestFirstTerminationInCallOrderEndsTheTurnWhicheverFinishesFirst(t *testing.T) {
	f := newFixture(t)
	tr := textTurn(f)
	rd := tr.Round(t.Context(), []transport.FunctionCall{
		{ID: "slow", Name: "bail", Args: map[string]any{"note": "first", "ms": 60}},
		{ID: "fast", Name: "bail", Args: map[string]any{"note": "second"}},
		{ID: "e", Name: "echo", Args: map[string]any{"text": "hi"}},
	}, nil)
	if rd.End == nil || rd.End.CallID != "slow" || rd.End.Text != "first" {
		t.Fatalf("end %+v, want the first call's", rd.End)
	}
	if len(rd.Responses) != 3 {
		t.Errorf("responses %+v, want every call answered", rd.Responses)
	}
}

func TestMalformedTerminationIsInternal(t *testing.T) {
	f := newFixture(t)
	for _, name := range []string{"terminate_failed", "terminate_with_data"} {
		tr := textTurn(f)
		o := handleOne(t, tr, call("x", name, nil), nil)
		if errType(o) != tools.ErrInternal {
			t.Errorf("%s: %+v, want INTERNAL", name, o.Envelope)
		}
		if end, ok := tr.Terminated(); ok {
			t.Errorf("%s ended the turn: %+v", name, end)
		}
	}
}

func TestModeChangeWinsOverAHandlerTermination(t *testing.T) {
	f := newFixture(t)
	tr := f.orch.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeVoice}, 1, nil)
	rd := tr.Round(t.Context(), []transport.FunctionCall{
		{ID: "b", Name: "bail", Args: map[string]any{"note": "Done."}},
		{ID: "g", Name: "good_intent"},
	}, nil)
	if rd.End != nil || !rd.ModeChange || len(rd.Responses) != 2 {
		t.Fatalf("end %+v, mode change %v, %d responses; want the switch to win and both answered",
			rd.End, rd.ModeChange, len(rd.Responses))
	}
}

// A model out of budget can still end the turn or the session: tools that
// are terminal (finish among them) or end a session are not counted.
func TestToolsThatEndSomethingAreExemptFromTheBudget(t *testing.T) {
	f := newFixture(t)
	o := f.with(orchestrator.Config{Budgets: orchestrator.Budgets{Text: orchestrator.Budget{MaxCalls: 1, MaxRetrieval: 1}}}, orchestrator.Deps{})
	tr := o.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeText}, 1, nil)
	if out := handleOne(t, tr, call("1", "noop", nil), nil); !out.Envelope.OK {
		t.Fatalf("first call: %+v", out.Envelope)
	}
	if out := handleOne(t, tr, call("2", "noop", nil), nil); errType(out) != tools.ErrBudgetExceeded {
		t.Fatalf("second ordinary call: %+v, want BUDGET_EXCEEDED", out.Envelope)
	}
	if out := handleOne(t, tr, call("3", "goodbye", nil), nil); !out.Envelope.OK {
		t.Errorf("a tool that ends a session was refused: %+v", out.Envelope)
	}
	if out := handleOne(t, tr, call("4", finishTool, map[string]any{"note": "Done."}), nil); !out.Envelope.OK {
		t.Errorf("finish was refused: %+v", out.Envelope)
	}
	if tr.Calls() != 1 {
		t.Errorf("Calls() = %d, want only the first ordinary call counted", tr.Calls())
	}
	tr = o.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeText}, 2, nil)
	handleOne(t, tr, call("5", "noop", nil), nil)
	if out := handleOne(t, tr, call("6", "hang_up", map[string]any{"text": "Bye."}), nil); !out.Envelope.OK {
		t.Errorf("a terminal tool was refused: %+v", out.Envelope)
	}
}

func TestControlCharactersAreStrippedFromResults(t *testing.T) {
	f := newFixture(t)
	out := f.exec(t.Context(), "dirty", nil)
	b, _ := json.Marshal(out.Response)
	want := `{"ok":true,"output":{"list":["z"],"n":3,"rows":["keep\ttab\nline",{"deep":"xy"}],"title":"Order 42"},"untrusted":true,"v":1}`
	if string(b) != want {
		t.Errorf("response %s\nwant     %s", b, want)
	}
	if out.Shown["title"] != "Order 42" {
		t.Errorf("shown %v, want the stripped title", out.Shown)
	}

	out = f.exec(t.Context(), "dirty", map[string]any{"kind": "struct"})
	if b, _ := json.Marshal(out.Response["output"]); string(b) != `{"tags":["cd"],"title":"ab"}` {
		t.Errorf("struct output %s, want its strings stripped", b)
	}
	// Keys too, at any depth; a key that was clean keeps its value over
	// one that only becomes it.
	out = f.exec(t.Context(), "dirty", map[string]any{"kind": "keys"})
	if b, _ := json.Marshal(out.Response["output"]); string(b) != `{"n":2,"rows":[{"de[2Jep":"x"}],"title":"Order 42"}` {
		t.Errorf("output with control characters in keys %s, want them stripped", b)
	}
	if out.Shown["title"] != "Order 42" {
		t.Errorf("shown %v, want the value under the stripped key", out.Shown)
	}
	if e := errorOf(t, f.exec(t.Context(), "dirty", map[string]any{"kind": "error"})); e["message"] != "bad news" {
		t.Errorf("error message %q, want it stripped", e["message"])
	}

	tr := textTurn(f)
	rd := tr.Round(t.Context(), []transport.FunctionCall{{ID: "d", Name: "dirty", Args: map[string]any{"kind": "terminate"}}}, nil)
	if rd.End == nil || rd.End.Text != "bye now" || rd.Responses[0].Response["output"] != "bye now" {
		t.Errorf("end %+v, response %v; want the note stripped", rd.End, rd.Responses[0].Response)
	}
	if len(rd.Intents) != 1 || rd.Intents[0].Message != "m" {
		t.Errorf("intents %+v, want the message stripped", rd.Intents)
	}
}

// The spec's debug events of the tool loop, each with session and turn.
func TestToolLoopDebugEvents(t *testing.T) {
	f := newFixture(t)
	tr := f.orch.NewTurn(orchestrator.Session{ID: "sess-log", UserID: "u", Mode: tools.ModeText}, 7, nil)
	tr.Round(t.Context(), []transport.FunctionCall{
		{ID: "ok-call", Name: "noop"},
		{ID: "bad-call", Name: "rate_limited"},
	}, nil)
	lines := strings.Split(f.log.String(), "\n")
	for _, want := range [][]string{
		{`msg="executing tool calls"`, "iteration=1", "count=2"},
		{`msg="executing tool"`, "tool=noop", "call=ok-call"},
		{`msg="executing tool"`, "tool=rate_limited", "call=bad-call"},
		{`msg="tool execution failed"`, "tool=rate_limited", "error_type=RATE_LIMIT"},
	} {
		want = append(want, "level=DEBUG", "session=sess-log", "turn=7")
		if !hasLine(lines, want) {
			t.Errorf("no log line with %v in:\n%s", want, f.log.String())
		}
	}
	if hasLine(lines, []string{`msg="tool execution failed"`, "tool=noop"}) {
		t.Error("a successful call was logged as failed")
	}
}

func hasLine(lines []string, parts []string) bool {
	for _, l := range lines {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			return true
		}
	}
	return false
}
