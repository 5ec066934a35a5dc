package script

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// checkCalls pairs the turn's scripted calls, in order, with the tool.call
// events (the order the gateway took the calls in is the model's order)
// and their tool.result events, and checks each call's expectation. It
// returns the confirmation the next turn answers.
func checkCalls(turn Turn, evs []Event, tr *TurnReport) *confirmAnswer {
	type seen struct {
		call, result Event
	}
	var order []string
	byID := map[string]*seen{}
	var confirms []Event
	for _, e := range evs {
		id := e.Str("id")
		switch e.Type() {
		case "tool.call":
			if byID[id] == nil {
				byID[id] = &seen{}
				order = append(order, id)
			}
			byID[id].call = e
		case "tool.args": // arguments of a call announced before they were complete
			if s := byID[id]; s != nil && s.call != nil {
				s.call["args"] = e["args"]
			}
		case "tool.result":
			if byID[id] == nil {
				byID[id] = &seen{}
				order = append(order, id)
			}
			byID[id].result = e
		case "confirm.request":
			confirms = append(confirms, e)
		}
	}
	var answer *confirmAnswer
	n := 0
	for j, r := range turn.Rounds {
		for k, want := range r.Calls {
			where := fmt.Sprintf("round %d, call %d (%s)", j+1, k+1, want.Tool)
			if n >= len(order) {
				tr.fail(where, "a tool.call", fmt.Sprintf("none: the browser saw %d tool calls in this turn", len(order)))
				n++
				continue
			}
			got := byID[order[n]]
			n++
			if name := got.call.Str("name"); got.call == nil || name != want.Tool {
				tr.fail(where, "a call of "+want.Tool, "a call of "+name)
				continue
			}
			checkCall(where, want.Expect, got.call, got.result, tr)
			if want.Expect.Confirm != "" {
				req := takeConfirm(&confirms, want.Tool)
				if req == nil {
					tr.fail(where, "a confirm.request for "+want.Tool, "none")
					continue
				}
				answer = &confirmAnswer{token: req.Str("token"), approve: want.Expect.Confirm == "approve"}
			}
		}
	}
	if n < len(order) {
		var extra []string
		for _, id := range order[n:] {
			extra = append(extra, byID[id].call.Str("name"))
		}
		tr.fail("tool calls", fmt.Sprintf("%d (the script's)", n), fmt.Sprintf("%d: also %s", len(order), strings.Join(extra, ", ")))
	}
	return answer
}

// takeConfirm removes and returns the first confirm.request for tool.
func takeConfirm(reqs *[]Event, tool string) Event {
	for i, r := range *reqs {
		if r.Str("tool") == tool {
			*reqs = slices.Delete(*reqs, i, i+1)
			return r
		}
	}
	return nil
}

// checkCall checks one call's outcome (from its tool.result) and the
// arguments and result fields the browser saw.
func checkCall(where string, want CallExpect, call, result Event, tr *TurnReport) {
	got := outcome(result)
	switch {
	case want.Ran != nil && *want.Ran:
		exp := "ran, ok"
		if want.Error != "" {
			exp = "ran, failed " + want.Error
		}
		if result == nil || result["refused"] == true || (want.Error == "") != (result["ok"] == true) ||
			want.Error != "" && errorType(result) != want.Error {
			tr.fail(where, exp, got)
		}
	case want.Ran != nil:
		if result == nil || result["refused"] != true {
			tr.fail(where, "refused", got)
		}
	case want.Refused != "":
		if result == nil || result["refused"] != true || errorType(result) != want.Refused {
			tr.fail(where, "refused "+want.Refused, got)
		}
	case want.Confirm != "":
		if result == nil || result["refused"] != true || errorType(result) != "CONFIRMATION_REQUIRED" {
			tr.fail(where, "refused CONFIRMATION_REQUIRED (the user is asked)", got)
		}
	}
	if want.Args != nil {
		args, _ := call["args"].(map[string]any)
		if !subset(want.Args, args) {
			tr.fail(where+" args", compact(want.Args), compact(args))
		}
	}
	if want.Result != nil {
		res, _ := result["result"].(map[string]any)
		if !subset(want.Result, res) {
			tr.fail(where+" result", compact(want.Result), compact(res))
		}
	}
}

// outcome describes a tool.result as the expectations name outcomes.
func outcome(result Event) string {
	switch {
	case result == nil:
		return "no tool.result"
	case result["refused"] == true:
		return fmt.Sprintf("refused %s (%s)", errorType(result), errorMessage(result))
	case result["ok"] == true:
		return "ran, ok"
	}
	return fmt.Sprintf("ran, failed %s (%s)", errorType(result), errorMessage(result))
}

func errorType(e Event) string {
	m, _ := e["error"].(map[string]any)
	s, _ := m["type"].(string)
	return s
}

func errorMessage(e Event) string {
	m, _ := e["error"].(map[string]any)
	s, _ := m["message"].(string)
	return s
}

// checkTurn checks the turn's final text, its end and its events.
func checkTurn(want TurnExpect, evs []Event, tr *TurnReport) {
	var types []string
	text, hasText, reason := "", false, ""
	for _, e := range evs {
		types = append(types, e.Type())
		switch e.Type() {
		case "text.done":
			text, hasText = e.Str("text"), true
		case "turn.done":
			reason = e.Str("reason")
		}
	}
	if want.Text != nil && (!hasText || text != *want.Text) {
		got := "no text.done"
		if hasText {
			got = fmt.Sprintf("%q", text)
		}
		tr.fail("text", fmt.Sprintf("%q", *want.Text), got)
	}
	if want.Reason != "" && reason != want.Reason {
		tr.fail("turn.done reason", want.Reason, reason)
	}
	if len(want.Events) > 0 && !inOrder(want.Events, types) {
		tr.fail("events (in this order)", strings.Join(want.Events, ", "), strings.Join(types, ", "))
	}
	for _, no := range want.NoEvents {
		if slices.Contains(types, no) {
			tr.fail("events", "no "+no, strings.Join(types, ", "))
		}
	}
}

// inOrder reports whether want is a subsequence of got.
func inOrder(want, got []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// subset reports whether every key of want is in got with an equal value,
// comparing as JSON does (YAML's 3 and JSON's 3.0 are the same number).
func subset(want, got map[string]any) bool {
	w, g := normalize(want), normalize(got)
	wm, _ := w.(map[string]any)
	gm, _ := g.(map[string]any)
	for k, v := range wm {
		gv, ok := gm[k]
		if !ok || !reflect.DeepEqual(v, gv) {
			return false
		}
	}
	return true
}

func normalize(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// compact is a map as one line of JSON, keys sorted; "none" for nil.
func compact(m map[string]any) string {
	if m == nil {
		return "none"
	}
	b, err := json.Marshal(normalize(m)) // map keys come out sorted
	if err != nil {
		return fmt.Sprint(m)
	}
	return string(b)
}
