package script

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
)

func ran() *bool { b := true; return &b }

func call(id, name string, args map[string]any) Event {
	return Event{"type": "tool.call", "id": id, "name": name, "args": args}
}

func result(id string, ok, refused bool, errType string) Event {
	e := Event{"type": "tool.result", "id": id, "ok": ok, "refused": refused}
	if errType != "" {
		e["error"] = map[string]any{"type": errType, "message": "why"}
	}
	return e
}

func TestCheckCallsPairsCallsWithResultsInTheModelsOrder(t *testing.T) {
	turn := Turn{User: "hi", Rounds: []Round{
		{Calls: []Call{
			{Tool: "kb_search", Expect: CallExpect{Ran: ran(), Args: map[string]any{"query": "a", "limit": 3}}},
			{Tool: "kb_search", Expect: CallExpect{Refused: "BUDGET_EXCEEDED"}},
		}},
		{Calls: []Call{{Tool: "create_ticket", Expect: CallExpect{Confirm: "deny"}}}},
		{Text: "ok"},
	}}
	// Refusals are reported as soon as they happen: results come out of order.
	evs := []Event{
		call("c1", "kb_search", map[string]any{"query": "a", "limit": float64(3)}), call("c2", "kb_search", nil),
		result("c2", false, true, "BUDGET_EXCEEDED"), result("c1", true, false, ""),
		call("c3", "create_ticket", nil), result("c3", false, true, "CONFIRMATION_REQUIRED"),
		{"type": "confirm.request", "tool": "create_ticket", "token": "tok"},
	}
	var tr TurnReport
	answer := checkCalls(turn, evs, &tr)
	if len(tr.Failures) != 0 {
		t.Fatalf("failures: %+v", tr.Failures)
	}
	if answer == nil || answer.token != "tok" || answer.approve {
		t.Fatalf("answer = %+v, want deny tok", answer)
	}
}

func TestCheckCallsNamesEachMismatchWithItsStep(t *testing.T) {
	turn := Turn{User: "hi", Rounds: []Round{
		{Calls: []Call{
			{Tool: "kb_search", Expect: CallExpect{Ran: ran()}},
			{Tool: "kb_get", Expect: CallExpect{Refused: "LOOP_DETECTED"}},
		}},
		{Calls: []Call{{Tool: "kb_get", Expect: CallExpect{Ran: ran(), Error: "TRANSIENT", Args: map[string]any{"id": "x"}}}}},
		{Text: "ok"},
	}}
	evs := []Event{
		call("c1", "kb_search", nil), result("c1", false, true, "BUDGET_EXCEEDED"),
		call("c2", "kb_get", nil), result("c2", true, false, ""),
		call("c3", "kb_get", map[string]any{"id": "y"}), result("c3", false, false, "TRANSIENT"),
		call("c4", "finish", nil), result("c4", true, false, ""),
	}
	var tr TurnReport
	checkCalls(turn, evs, &tr)
	want := []Failure{
		{"round 1, call 1 (kb_search)", "ran, ok", "refused BUDGET_EXCEEDED (why)"},
		{"round 1, call 2 (kb_get)", "refused LOOP_DETECTED", "ran, ok"},
		{"round 2, call 1 (kb_get) args", `{"id":"x"}`, `{"id":"y"}`},
		{"tool calls", "3 (the script's)", "4: also finish"},
	}
	if len(tr.Failures) != len(want) {
		t.Fatalf("failures %+v, want %+v", tr.Failures, want)
	}
	for i := range want {
		if tr.Failures[i] != want[i] {
			t.Errorf("failure %d = %+v, want %+v", i, tr.Failures[i], want[i])
		}
	}
}

func TestCheckTurnChecksTextReasonAndEventOrder(t *testing.T) {
	evs := []Event{{"type": "turn.start"}, {"type": "tool.call"}, {"type": "text.done", "text": "hi"},
		{"type": "turn.done", "reason": "end_turn"}}
	text := "hi"
	var ok TurnReport
	checkTurn(TurnExpect{Text: &text, Reason: "end_turn", Events: []string{"turn.start", "turn.done"},
		NoEvents: []string{"error"}}, evs, &ok)
	if len(ok.Failures) != 0 {
		t.Fatalf("failures: %+v", ok.Failures)
	}
	other := "bye"
	var bad TurnReport
	checkTurn(TurnExpect{Text: &other, Reason: "finish", Events: []string{"text.done", "tool.call"},
		NoEvents: []string{"tool.call"}}, evs, &bad)
	var where []string
	for _, f := range bad.Failures {
		where = append(where, f.Where)
	}
	if got := strings.Join(where, "; "); got != "text; turn.done reason; events (in this order); events" {
		t.Fatalf("failures at %s: %+v", got, bad.Failures)
	}
}

func TestWriteJUnitReportsEachTurnAsATestCase(t *testing.T) {
	s := &Script{Name: "demo", file: "demo.yaml", Turns: make([]Turn, 3)}
	rep := &Report{Script: s, Turns: []TurnReport{
		{N: 1, Title: "turn 1"},
		{N: 2, Title: "turn 2", Failures: []Failure{{"round 1, call 1 (kb_get)", "ran, ok", "refused NOT_FOUND (no such tool)"}}},
		{N: 3, Title: "turn 3", Skipped: true},
	}}
	var b bytes.Buffer
	if err := WriteJUnit(&b, []*Report{rep}); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suite    struct {
			Name    string `xml:"name,attr"`
			Skipped int    `xml:"skipped,attr"`
			Cases   []struct {
				Name    string `xml:"name,attr"`
				Failure string `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if got.Tests != 3 || got.Failures != 1 || got.Suite.Name != "demo" || got.Suite.Skipped != 1 ||
		!strings.Contains(got.Suite.Cases[1].Failure, "+ got:      refused NOT_FOUND") {
		t.Fatalf("JUnit %+v\n%s", got, b.String())
	}
	if rep.Passed() {
		t.Fatal("a report with a failure passed")
	}
}
