package orchestrator_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/turnstile-gw/turnstile/orchestrator"
)

func TestPlainTextReadsResultsWithoutJSONPunctuation(t *testing.T) {
	cases := []struct {
		name string
		data any
		want string
	}{
		{"search results", map[string]any{"results": []map[string]any{
			{"id": "hours", "title": "Opening hours", "snippet": "We are open\n 9 to 5.", "score": 1.25},
			{"id": "parking", "title": "Parking", "snippet": "Behind the building", "score": 0.5},
		}}, "results: 1) title: Opening hours, id: hours, score: 1.25, snippet: We are open 9 to 5. " +
			"2) title: Parking, id: parking, score: 0.5, snippet: Behind the building."},
		{"no results", map[string]any{"results": []any{}}, "results: none."},
		{"document", map[string]any{"id": "hours", "title": "Opening hours", "body": "# Hours\n\n* We are open 9 to 5."},
			"title: Opening hours. body: Hours We are open 9 to 5. id: hours."},
		{"no data", nil, "ok"},
		{"text", "  hello\n\n\tworld ", "hello world"},
		{"blank text", " \n", "none"},
		{"list of words", []any{"a", "b", 3}, "a, b, 3"},
		{"snake_case keys, booleans, nesting", map[string]any{"duration_seconds": 30, "user_blocked": true,
			"tags": []any{"x", "y"}, "meta": map[string]any{"retry_after": 1, "reason": nil}},
			"duration seconds: 30. meta: reason: none, retry after: 1. tags: x, y. user blocked: yes."},
		{"false and zero", map[string]any{"found": false, "count": 0}, "count: 0. found: no."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := orchestrator.PlainText(tc.data); got != tc.want {
				t.Errorf("PlainText =\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestPlainTextReadsShapeMarkersAsWords(t *testing.T) {
	arr := make([]any, 300)
	for i := range arr {
		arr[i] = map[string]any{"title": fmt.Sprint("Doc ", i), "snippet": strings.Repeat("word ", 20)}
	}
	shaped, _ := orchestrator.Shape(map[string]any{"results": arr}, 2000)
	got := orchestrator.PlainText(shaped)
	if !strings.HasPrefix(got, "results: 1) title: Doc 0, snippet: word") || !hasMoreNotShown(got) {
		t.Errorf("PlainText of shaped results = %q, want numbered results and how many are not shown", got)
	}

	obj := map[string]any{}
	for i := range 500 {
		obj[fmt.Sprintf("key%03d", i)] = "v"
	}
	wrapped, _ := orchestrator.Shape(obj, 300)
	got = orchestrator.PlainText(wrapped)
	if !strings.HasPrefix(got, "partial result: key000: v, key001: v") {
		t.Errorf("PlainText of a _truncated_json wrapper = %q, want the partial text as words", got)
	}
	for _, text := range []string{got, orchestrator.PlainText(shaped)} {
		if strings.ContainsAny(text, `{}[]"`) || strings.Contains(text, "_truncated") {
			t.Errorf("PlainText = %q contains JSON punctuation or marker names", text)
		}
	}
}

func hasMoreNotShown(s string) bool {
	var n int
	_, err := fmt.Sscanf(s[strings.LastIndex(s, "and "):], "and %d more not shown.", &n)
	return err == nil && n > 0 && n < 300
}

func TestPlainTextIsBounded(t *testing.T) {
	long := strings.Repeat("ééé word ", 20000)
	for _, data := range []any{
		long,
		map[string]any{"body": long, "title": "Big"},
		[]any{long, long},
	} {
		got := orchestrator.PlainText(data)
		if len(got) > orchestrator.PlainTextMaxBytes {
			t.Fatalf("PlainText is %d bytes, over %d", len(got), orchestrator.PlainTextMaxBytes)
		}
		if len(got) < orchestrator.PlainTextMaxBytes-100 {
			t.Errorf("PlainText is %d bytes, want close to the bound", len(got))
		}
		if !utf8.ValidString(got) || !strings.HasSuffix(got, "word … (truncated)") {
			t.Errorf("PlainText ends %q, want a cut on a word boundary and the marker", got[len(got)-40:])
		}
	}
	if got := orchestrator.PlainText("short enough"); got != "short enough" {
		t.Errorf("short text = %q, want it unchanged", got)
	}
}
