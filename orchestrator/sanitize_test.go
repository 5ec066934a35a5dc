package orchestrator

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/turnstile-gw/turnstile/protocol"
)

// controlFree reports whether no string or key in a decoded JSON value
// holds a control character StripControl removes.
func controlFree(v any) bool {
	switch x := v.(type) {
	case string:
		return !protocol.HasControl(x)
	case map[string]any:
		for k, e := range x {
			if protocol.HasControl(k) || !controlFree(e) {
				return false
			}
		}
	case []any:
		for _, e := range x {
			if !controlFree(e) {
				return false
			}
		}
	}
	return true
}

func decodeGeneric(t *testing.T, raw []byte) (any, bool) {
	t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

// FuzzSanitizeValue: every string value of a result is stripped, the
// handler's value is never modified, and "changed" says whether anything
// was.
func FuzzSanitizeValue(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\u0000b"`, `{"k":"\u001b[0m","n":[1,"\u007f",{"d":"\u0085"}]}`,
		`[true,null,1.5,"x\ty"]`, `{"\u0000key":"v"}`, `{"a":{"b":{"c":["\u0001"]}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, ok := decodeGeneric(t, raw)
		if !ok {
			return
		}
		before, _ := json.Marshal(v)
		got, changed := sanitizeValue(v)
		after, _ := json.Marshal(v)
		if !bytes.Equal(before, after) {
			t.Fatalf("the input was modified: %s became %s", before, after)
		}
		if !controlFree(got) {
			t.Fatalf("sanitizeValue(%s) left control characters", before)
		}
		if changed == controlFree(v) {
			t.Fatalf("sanitizeValue(%s) reported changed=%v", before, changed)
		}
		if !changed && !reflect.DeepEqual(got, v) {
			t.Fatalf("sanitizeValue(%s) changed the value but said it did not", before)
		}
		// Through a typed value (the JSON path), the same strings result.
		type wrapped struct{ V any }
		typed, _ := sanitizeValue(wrapped{V: v})
		if !controlFree(typed) {
			t.Fatalf("the JSON path left control characters in %s", before)
		}
	})
}

// BenchmarkSanitizeCleanResult is the pipeline's added cost for a typical
// clean result (a kb_search answer): one pass over its strings.
func BenchmarkSanitizeCleanResult(b *testing.B) {
	results := make([]map[string]any, 5)
	for i := range results {
		results[i] = map[string]any{"id": "refund-policy", "title": "Refunds and returns",
			"snippet": strings.Repeat("Refunds are issued within five business days. ", 6), "score": 1.5}
	}
	data := map[string]any{"results": results}
	b.ReportAllocs()
	for b.Loop() {
		if _, changed := sanitizeValue(data); changed {
			b.Fatal("a clean result changed")
		}
	}
}

// BenchmarkSanitizeStructResult is the cost for a clean typed result,
// checked through its JSON encoding.
func BenchmarkSanitizeStructResult(b *testing.B) {
	type hit struct {
		ID, Title, Snippet string
		Score              float64
	}
	data := []hit{{"refund-policy", "Refunds and returns", strings.Repeat("Refunds are issued within five days. ", 6), 1.5}}
	b.ReportAllocs()
	for b.Loop() {
		if _, changed := sanitizeValue(data); changed {
			b.Fatal("a clean result changed")
		}
	}
}
