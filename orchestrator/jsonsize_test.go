package orchestrator

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// Shape's budgeting relies on jsonSize matching json.Marshal byte for
// byte; Shape re-checks the result, but a drift would cost precision. The
// size the metrics record is jsonChars, its characters.
func TestShapeSizeMirrorsMarshal(t *testing.T) {
	var all strings.Builder
	for r := rune(0); r < 0x300; r++ {
		all.WriteRune(r)
	}
	values := []any{
		nil, true, false, json.Number("-12.5e3"), 0, -42, 1234567,
		all.String(), "\u2028\u2029\ufffd😀", "bad \xff\xfe utf8 \xc3", "héllo wörld 你好 🎉",
		[]any{}, []any{1, "a", nil}, map[string]any{}, map[string]any{"<k>": "&v", "é": []any{map[string]any{}}},
		struct{ A string }{"x"},
	}
	for _, v := range values {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := jsonSize(v); got != len(b) {
			t.Errorf("jsonSize(%#v) = %d, json.Marshal writes %d bytes: %s", v, got, len(b), b)
		}
		if got, want := jsonChars(v), utf8.RuneCount(b); got != want {
			t.Errorf("jsonChars(%#v) = %d, json.Marshal writes %d characters: %s", v, got, want, b)
		}
	}
}

func FuzzShapeSizeMirrorsMarshal(f *testing.F) {
	f.Add("plain")
	f.Add("<script>&\u2028\x00\xff")
	f.Fuzz(func(t *testing.T, s string) {
		b, _ := json.Marshal(s)
		if got := quotedSize(s); got != len(b) {
			t.Fatalf("quotedSize(%q) = %d, json.Marshal writes %d bytes", s, got, len(b))
		}
		if got, want := quotedChars(s), utf8.RuneCount(b); got != want {
			t.Fatalf("quotedChars(%q) = %d, json.Marshal writes %d characters", s, got, want)
		}
		if n := prefixWithin(s, len(b)/2); n < len(s) && quotedSize(s[:n]) > len(b)/2+2 {
			t.Fatalf("prefixWithin(%q) = %d overshoots", s, n)
		}
	})
}
