package fakedemo

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

var kbTools = []string{"finish", "kb_get", "kb_search", "start_voice_session"}

func TestDemoGreetsAndExplainsWithoutCallingTools(t *testing.T) {
	for _, text := range []string{"hi", "Hello!", "hey there", "Good morning"} {
		a := Decide(Input{Text: text, Tools: kbTools})
		if len(a.Calls) != 0 || !strings.Contains(a.Text, "offline demo model") {
			t.Errorf("%q: %+v, want a greeting from the demo model", text, a)
		}
	}
	for _, text := range []string{"help", "What can you do?"} {
		a := Decide(Input{Text: text, Tools: kbTools})
		if len(a.Calls) != 0 || !strings.Contains(a.Text, "kb_search") || !strings.Contains(a.Text, "/call") {
			t.Errorf("%q: %+v, want an explanation that names kb_search and /call", text, a)
		}
	}
}

func TestDemoLooksQuestionsUpThenOpensTheBestHitThenQuotesIt(t *testing.T) {
	const q = "Hi, how long do refunds take?"
	a := Decide(Input{Text: q, LastUser: q, Tools: kbTools})
	want := []Call{{Name: "kb_search", Args: map[string]any{"query": q, "limit": 3}, ArgsJSON: `{"limit":3,"query":"Hi, how long do refunds take?"}`}}
	if !reflect.DeepEqual(a.Calls, want) || a.Text != "" {
		t.Fatalf("question: %+v, want %+v", a, want)
	}

	a = Decide(Input{LastUser: q, Tools: kbTools, Results: []Result{{Name: "kb_search", Response: map[string]any{
		"output": map[string]any{"results": []any{
			map[string]any{"id": "refund-policy", "title": "Refund policy"},
			map[string]any{"id": "shipping", "title": "Shipping"},
		}}}}}})
	if len(a.Calls) != 1 || a.Calls[0].Name != "kb_get" || a.Calls[0].Args["id"] != "refund-policy" || a.Calls[0].ArgsJSON != `{"id":"refund-policy"}` {
		t.Fatalf("after search: %+v, want kb_get of the best hit", a)
	}

	body := "# Refund policy\n\nRefunds are paid **within five business days**. See [returns](https://x/returns).\n\n## More\n\nGift cards are final."
	a = Decide(Input{LastUser: q, Tools: kbTools, Results: []Result{{Name: "kb_get", Response: map[string]any{
		"output": map[string]any{"id": "refund-policy", "title": "Refund policy", "body": body}}}}})
	if want := "From “Refund policy”: Refunds are paid within five business days. See returns. Gift cards are final."; a.Text != want {
		t.Fatalf("after get: %q, want %q", a.Text, want)
	}
}

func TestDemoSaysSoWhenSearchFindsNothingOrAToolFails(t *testing.T) {
	a := Decide(Input{LastUser: "beans?", Results: []Result{{Name: "kb_search", Response: map[string]any{
		"output": map[string]any{"results": []any{}}}}}})
	if !strings.Contains(a.Text, "couldn't find anything") {
		t.Errorf("empty search: %q", a.Text)
	}
	a = Decide(Input{LastUser: "beans?", Results: []Result{{Name: "kb_search", Response: map[string]any{
		"error": map[string]any{"type": "TIMEOUT", "message": "the index is slow", "retryable": true}}}}})
	if a.Text != "Sorry, the kb_search tool failed: the index is slow You can try again in a moment." {
		t.Errorf("failure: %q", a.Text)
	}
}

func TestDemoWithoutKBSearchSaysItCannotLookUp(t *testing.T) {
	a := Decide(Input{Text: "how do refunds work?", Tools: []string{"finish"}})
	if len(a.Calls) != 0 || !strings.Contains(a.Text, "no kb_search") {
		t.Errorf("%+v, want an explanation instead of a call to an undeclared tool", a)
	}
}

func TestSlashCallCallsAnyDeclaredToolWithItsArguments(t *testing.T) {
	text := `/call start_voice_session {"reason": "hands busy", "n": 2}`
	a := Decide(Input{Text: text, LastUser: text, Tools: kbTools})
	want := []Call{{Name: "start_voice_session", Args: map[string]any{"reason": "hands busy", "n": float64(2)},
		ArgsJSON: `{"reason": "hands busy", "n": 2}`}}
	if !reflect.DeepEqual(a.Calls, want) {
		t.Fatalf("calls = %+v, want %+v", a.Calls, want)
	}
	a = Decide(Input{Text: "/call finish", Tools: kbTools})
	if len(a.Calls) != 1 || a.Calls[0].ArgsJSON != "{}" || len(a.Calls[0].Args) != 0 || a.Calls[0].Args == nil {
		t.Fatalf("/call without arguments: %+v, want {}", a.Calls)
	}
}

func TestSlashCallRefusesUnknownToolsAndExplainsUsage(t *testing.T) {
	a := Decide(Input{Text: "/call launch_rockets {}", Tools: kbTools})
	if len(a.Calls) != 0 || !strings.HasPrefix(a.Text, "I can't call launch_rockets: it is not declared in this session.") || !strings.Contains(a.Text, "kb_search") {
		t.Errorf("unknown tool: %+v", a)
	}
	a = Decide(Input{Text: "/call", Tools: kbTools})
	if len(a.Calls) != 0 || !strings.Contains(a.Text, "/call NAME") {
		t.Errorf("bare /call: %+v", a)
	}
	if a := Decide(Input{Text: "/caller id please", Tools: kbTools}); len(a.Calls) != 1 || a.Calls[0].Name != "kb_search" {
		t.Errorf("a word that only starts with /call is a question: %+v", a)
	}
}

func TestSlashCallWithBrokenJSONIsSentAsTypedOnlyWhereArgumentsAreText(t *testing.T) {
	text := `/call kb_search {"query": "caf`
	a := Decide(Input{Text: text, Tools: kbTools, RawArgs: true})
	if len(a.Calls) != 1 || a.Calls[0].Args != nil || a.Calls[0].ArgsJSON != `{"query": "caf` {
		t.Fatalf("raw-args provider: %+v, want the broken text sent as typed", a)
	}
	a = Decide(Input{Text: text, Tools: kbTools})
	if len(a.Calls) != 0 || !strings.Contains(a.Text, "must be a JSON object") {
		t.Fatalf("object-args provider: %+v, want an explanation", a)
	}
	if a := Decide(Input{Text: `/call kb_search ["refunds"]`, Tools: kbTools}); len(a.Calls) != 0 {
		t.Fatalf("an array is not an argument object: %+v", a)
	}
}

func TestResultsOfASlashCallAreReportedAsTheyAre(t *testing.T) {
	long := strings.Repeat("é", 2*outputLimit)
	a := Decide(Input{LastUser: `/call kb_search {"query":"x"}`, Results: []Result{
		{Name: "kb_search", Response: map[string]any{"output": map[string]any{"results": []any{map[string]any{"id": "a"}}}}},
		{Name: "kb_get", Response: map[string]any{"error": map[string]any{"type": "VALIDATION", "code": "invalid_json",
			"message": "Invalid tool arguments JSON"}}},
		{Name: "finish", Response: map[string]any{"output": long}},
	}})
	lines := strings.Split(a.Text, "\n")
	if len(a.Calls) != 0 || len(lines) != 3 {
		t.Fatalf("%+v, want three report lines and no call (no automatic kb_get after a /call)", a)
	}
	if lines[0] != `The kb_search tool succeeded: {"results":[{"id":"a"}]}` || lines[1] != "The kb_get tool failed: Invalid tool arguments JSON" {
		t.Errorf("report = %q", lines[:2])
	}
	if n := utf8.RuneCountInString(strings.TrimPrefix(lines[2], "The finish tool succeeded: ")); n != outputLimit || !strings.HasSuffix(lines[2], "…") {
		t.Errorf("a long output is quoted in %d runes, want %d ending with an ellipsis", n, outputLimit)
	}
}

func TestParseSlashCall(t *testing.T) {
	cases := []struct {
		text    string
		ok      bool
		name    string
		args    map[string]any
		problem bool
	}{
		{"/call t", true, "t", map[string]any{}, false},
		{`  /call t   {"a": [1]}  `, true, "t", map[string]any{"a": []any{1.0}}, false},
		{`/call t{"a":1}`, true, "t", map[string]any{"a": 1.0}, false},
		{"/call\tt", true, "t", map[string]any{}, false},
		{"/call t null", true, "t", map[string]any{}, true},
		{"/call t {", true, "t", map[string]any{}, true},
		{"/callt", false, "", nil, false},
		{"please /call t", false, "", nil, false},
		{"what is /call?", false, "", nil, false},
	}
	for _, tc := range cases {
		c, ok := parseCall(tc.text)
		if ok != tc.ok || c.name != tc.name || (c.problem != "") != tc.problem || tc.ok && !reflect.DeepEqual(c.args, tc.args) {
			t.Errorf("parseCall(%q) = %+v, %v; want %q %v problem %v ok %v", tc.text, c, ok, tc.name, tc.args, tc.problem, tc.ok)
		}
	}
}

func TestSlashCallMakesSeveralCallsInOneMessage(t *testing.T) {
	a := Decide(Input{Text: `/call kb_search {"query": "a; b"}; kb_get {"id":"shipping"} ;finish`, Tools: kbTools})
	want := []Call{
		{Name: "kb_search", Args: map[string]any{"query": "a; b"}, ArgsJSON: `{"query": "a; b"}`},
		{Name: "kb_get", Args: map[string]any{"id": "shipping"}, ArgsJSON: `{"id":"shipping"}`},
		{Name: "finish", Args: map[string]any{}, ArgsJSON: "{}"},
	}
	if a.Text != "" || !reflect.DeepEqual(a.Calls, want) {
		t.Fatalf("calls = %+v, want %+v", a, want)
	}
	// One undeclared tool: nothing is called, and the user is told which.
	a = Decide(Input{Text: `/call kb_search {"query":"x"}; launch_rockets {}`, Tools: kbTools})
	if len(a.Calls) != 0 || !strings.Contains(a.Text, "launch_rockets") {
		t.Fatalf("%+v, want no call and a word about launch_rockets", a)
	}
	// What does not split into calls is one call with a problem, as before.
	a = Decide(Input{Text: `/call kb_search {"query":"x"} trailing words`, Tools: kbTools})
	if len(a.Calls) != 0 || !strings.Contains(a.Text, "couldn't read the arguments") {
		t.Fatalf("%+v, want the arguments problem", a)
	}
}
