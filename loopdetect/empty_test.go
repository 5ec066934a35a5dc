package loopdetect_test

import (
	"encoding/json"
	"testing"

	"github.com/turnstile-gw/turnstile/loopdetect"
)

type hit struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

func TestIsEmptyResult(t *testing.T) {
	var nilHits []hit
	var nilPtr *hit
	cases := []struct {
		name  string
		data  any
		empty bool
	}{
		{"nil", nil, true},
		{"empty string", "", true},
		{"whitespace string", " \n\t\u00a0", true},
		{"text", "no", false},
		{"zero", 0, false},
		{"false", false, false},
		{"json zero", json.Number("0"), false},
		{"empty array", []any{}, true},
		{"array of blanks", []any{nil, "  "}, true},
		{"array with text", []any{"", "x"}, false},
		{"empty map", map[string]any{}, true},
		{"results empty", map[string]any{"results": []any{}}, true},
		{"results null", map[string]any{"results": nil}, true},
		{"results empty with metadata", map[string]any{"results": []any{}, "total": 0, "query": "x"}, true},
		{"items empty in other case", map[string]any{"Items": []any{}, "cursor": "abc"}, true},
		{"results with a hit", map[string]any{"results": []any{map[string]any{"id": "a"}}}, false},
		{"one result set full", map[string]any{"results": []any{}, "hits": []any{"x"}}, false},
		{"object of blanks", map[string]any{"title": "", "body": " "}, true},
		{"document with empty tags", map[string]any{"id": "a", "tags": []any{}}, false},
		{"count only", map[string]any{"count": 0}, false},
		{"typed empty slice", []hit{}, true},
		{"typed nil slice", nilHits, true},
		{"typed nil pointer", nilPtr, true},
		{"typed results empty", map[string]any{"results": []map[string]any{}}, true},
		{"typed results full", map[string]any{"results": []hit{{ID: "a"}}}, false},
		{"struct with fields", hit{ID: "a"}, false},
		{"struct of blanks", hit{}, true},
		{"raw empty results", json.RawMessage(`{"results": []}`), true},
		{"raw full results", json.RawMessage(`{"results": [1]}`), false},
		{"unencodable", map[string]any{"f": func() {}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := loopdetect.IsEmptyResult(tc.data); got != tc.empty {
				t.Errorf("IsEmptyResult(%#v) = %v, want %v", tc.data, got, tc.empty)
			}
		})
	}
}

func TestIsEmptyResultTerminatesOnCycles(t *testing.T) {
	m := map[string]any{}
	m["self"] = m
	if loopdetect.IsEmptyResult(m) {
		t.Fatal("a self-referencing map is reported empty")
	}
}
