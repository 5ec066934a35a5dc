package orchestrator_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/turnstile-gw/turnstile/orchestrator"
)

const resultBudget = 64 << 10

// encoded returns the JSON encoding of v, failing the test if it has none.
func encoded(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %T: %v", v, err)
	}
	return b
}

// shapeWithin runs Shape and fails the test when the result is over budget.
func shapeWithin(t testing.TB, v any, budget int) (any, bool) {
	t.Helper()
	out, truncated := orchestrator.Shape(v, budget)
	if n := len(encoded(t, out)); n > max(budget, 2) {
		t.Fatalf("Shape(…, %d) encodes to %d bytes", budget, n)
	}
	return out, truncated
}

func TestShapePassesSmallValuesThroughUntouched(t *testing.T) {
	type hit struct {
		ID    string  `json:"id"`
		Score float64 `json:"score"`
	}
	obj := map[string]any{"results": []any{map[string]any{"id": "a"}}}
	for _, v := range []any{nil, "hello", 42, true, obj, []hit{{"a", 1.5}}, hit{"b", 2}} {
		out, truncated := orchestrator.Shape(v, resultBudget)
		if truncated || !reflect.DeepEqual(out, v) {
			t.Errorf("Shape(%#v) = (%#v, %v), want the value untouched", v, out, truncated)
		}
	}
	out, _ := orchestrator.Shape(obj, resultBudget)
	if reflect.ValueOf(out).UnsafePointer() != reflect.ValueOf(obj).UnsafePointer() {
		t.Error("a small map came back as a copy, want the same map")
	}
}

func TestShapeCutsLongStringOnRuneBoundaryWithSuffix(t *testing.T) {
	for _, unit := range []string{"a", "é", "€", "😀", "<&>", "\n\"\\"} {
		long := strings.Repeat(unit, 5000)
		out, truncated := shapeWithin(t, long, 1000)
		s, ok := out.(string)
		if !truncated || !ok {
			t.Fatalf("%q: Shape = (%T, %v), want a truncated string", unit, out, truncated)
		}
		if !utf8.ValidString(s) {
			t.Fatalf("%q: cut string is not valid UTF-8", unit)
		}
		prefix, suffix, found := strings.Cut(s, "… [truncated ")
		if !found || !strings.HasPrefix(long, prefix) || len(prefix) == 0 {
			t.Fatalf("%q: got %.80q…, want a prefix of the original plus the suffix", unit, s)
		}
		if want := fmt.Sprintf("%d bytes]", len(long)-len(prefix)); suffix != want {
			t.Errorf("%q: suffix %q, want %q", unit, suffix, want)
		}
		// The prefix is as long as the budget allows: one more unit would
		// not fit.
		if n := len(encoded(t, s)); n < 1000-len(encoded(t, unit)) {
			t.Errorf("%q: shaped string uses %d of 1000 bytes", unit, n)
		}
	}
}

func TestShapeArrayKeepsLeadingElementsAndEndsWithSentinel(t *testing.T) {
	arr := make([]any, 200)
	for i := range arr {
		arr[i] = map[string]any{"id": fmt.Sprintf("doc-%03d", i), "snippet": strings.Repeat("x", 100)}
	}
	out, truncated := shapeWithin(t, arr, 4096)
	got, ok := out.([]any)
	if !truncated || !ok || len(got) < 2 {
		t.Fatalf("Shape = (%#v, %v), want a shorter array", out, truncated)
	}
	kept := got[:len(got)-1]
	for i, e := range kept {
		if !reflect.DeepEqual(e, arr[i]) {
			t.Fatalf("element %d = %#v, want %#v", i, e, arr[i])
		}
	}
	want := map[string]any{"_truncated": true, "omitted": 200 - len(kept)}
	if sentinel := got[len(got)-1]; !reflect.DeepEqual(sentinel, want) {
		t.Fatalf("last element = %#v, want %#v", sentinel, want)
	}
	// Whole elements only: there is no room for one more.
	if n := len(encoded(t, out)); n+len(encoded(t, arr[0]))+1 <= 4096 {
		t.Errorf("shaped array uses %d of 4096 bytes while another element would fit", n)
	}
}

func TestShapeKeepsResultsObjectWithFewerResults(t *testing.T) {
	results := make([]map[string]any, 50)
	for i := range results {
		results[i] = map[string]any{"id": fmt.Sprint(i), "title": fmt.Sprintf("Doc %d", i),
			"snippet": strings.Repeat("lorem ipsum ", 200)}
	}
	data := map[string]any{"results": results, "query": "opening hours", "total": 50}
	out, truncated := shapeWithin(t, data, resultBudget)
	obj, ok := out.(map[string]any)
	if !truncated || !ok {
		t.Fatalf("Shape = (%T, %v), want a truncated object", out, truncated)
	}
	if obj["query"] != "opening hours" || obj["total"] != json.Number("50") {
		t.Errorf("small members changed: query=%v total=%v", obj["query"], obj["total"])
	}
	got, ok := obj["results"].([]any)
	if !ok || len(got) < 10 || len(got) > 50 {
		t.Fatalf("results = %T with %d elements, want a shorter array", obj["results"], len(got))
	}
	for i, r := range got[:len(got)-1] {
		if r.(map[string]any)["id"] != fmt.Sprint(i) {
			t.Fatalf("result %d is %v, want the leading results in order", i, r)
		}
	}
	if s := got[len(got)-1].(map[string]any); s["_truncated"] != true {
		t.Fatalf("results do not end with the sentinel: %v", s)
	}
}

func TestShapeCutsOnlyTheBigMemberOfADocument(t *testing.T) {
	body := strings.Repeat("Paragraph of the handbook. ", 10000)
	doc := map[string]any{"id": "handbook", "title": "Staff handbook", "body": body}
	out, _ := shapeWithin(t, doc, 2000)
	obj := out.(map[string]any)
	if obj["id"] != "handbook" || obj["title"] != "Staff handbook" {
		t.Errorf("id/title changed: %v %v", obj["id"], obj["title"])
	}
	cut, _ := obj["body"].(string)
	if !strings.HasPrefix(cut, "Paragraph of the handbook.") || !strings.Contains(cut, "[truncated ") {
		t.Errorf("body = %.100q, want its start plus the truncation suffix", cut)
	}
	if len(cut) < 1800 {
		t.Errorf("body kept %d bytes of a 2000-byte budget", len(cut))
	}
}

func TestShapeCutsAnArrayWhoseFirstElementIsTooBig(t *testing.T) {
	out, _ := shapeWithin(t, []any{strings.Repeat("z", 10000), "next"}, 500)
	arr := out.([]any)
	if len(arr) != 2 {
		t.Fatalf("got %d elements, want the cut first element and the sentinel", len(arr))
	}
	if s, _ := arr[0].(string); !strings.HasPrefix(s, "zzzz") || !strings.Contains(s, "[truncated") {
		t.Errorf("first element = %.60q, want it cut", arr[0])
	}
	if omitted := arr[1].(map[string]any)["omitted"]; omitted != 1 {
		t.Errorf("omitted = %v, want 1", omitted)
	}
}

func TestShapeWrapsObjectWhoseKeysCannotFit(t *testing.T) {
	obj := map[string]any{}
	for i := range 5000 {
		obj[fmt.Sprintf("key-%05d", i)] = i
	}
	raw := encoded(t, obj)
	out, truncated := shapeWithin(t, obj, 1024)
	w, ok := out.(map[string]any)
	if !truncated || !ok || len(w) != 2 {
		t.Fatalf("Shape = %#v, want the _truncated_json wrapper", out)
	}
	prefix, _ := w["_truncated_json"].(string)
	if len(prefix) < 800 || !strings.HasPrefix(string(raw), prefix) {
		t.Errorf("_truncated_json = %.60q (%d bytes), want a long prefix of the JSON text", prefix, len(prefix))
	}
	if w["originalBytes"] != len(raw) {
		t.Errorf("originalBytes = %v, want %d", w["originalBytes"], len(raw))
	}
}

func TestShapeExactBudgetEdges(t *testing.T) {
	values := []any{
		strings.Repeat("é", 300),
		[]any{"a", "b", "c", strings.Repeat("d", 200), 1, 2, 3},
		map[string]any{"results": []any{"x", "y", strings.Repeat("w", 300)}, "n": 1},
		map[string]any{"a": map[string]any{"b": map[string]any{"c": strings.Repeat("<", 100)}}},
	}
	for _, v := range values {
		size := len(encoded(t, v))
		if out, truncated := orchestrator.Shape(v, size); truncated || !reflect.DeepEqual(out, v) {
			t.Errorf("at exactly its size (%d) %T was changed", size, v)
		}
		if _, truncated := shapeWithin(t, v, size-1); !truncated {
			t.Errorf("one byte under its size (%d) %T was not truncated", size, v)
		}
		for budget := 0; budget < size; budget++ {
			out, truncated := shapeWithin(t, v, budget)
			if !truncated {
				t.Fatalf("budget %d < size %d but not truncated", budget, size)
			}
			// Shaped output is small enough to pass through again unchanged.
			if again, tr := orchestrator.Shape(out, budget); tr || !reflect.DeepEqual(again, out) {
				t.Fatalf("budget %d: shaping the shaped value changed it", budget)
			}
		}
	}
}

func TestShapeUnencodableValueBecomesAnExplanation(t *testing.T) {
	out, truncated := shapeWithin(t, map[string]any{"f": func() {}}, 1000)
	if s, ok := out.(string); !truncated || !ok || !strings.Contains(s, "could not be encoded") {
		t.Fatalf("Shape = (%#v, %v), want an explanatory string", out, truncated)
	}
}

func TestShapeRandomValuesNeverExceedBudget(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 1000 {
		v := randomValue(rng, 0)
		budget := rng.IntN(3000)
		if i%10 == 0 {
			budget = rng.IntN(40)
		}
		out, truncated := shapeWithin(t, v, budget)
		if size := len(encoded(t, v)); size <= max(budget, 2) {
			if truncated || !reflect.DeepEqual(out, v) {
				t.Fatalf("value of %d bytes under budget %d was changed", size, budget)
			}
		} else if !truncated {
			t.Fatalf("value of %d bytes over budget %d not reported truncated", size, budget)
		}
	}
}

// randomValue builds a decoded-JSON-like value with strings that exercise
// escaping and multibyte text.
func randomValue(rng *rand.Rand, depth int) any {
	pieces := []string{"a", "é", "😀", "<", "&", "\"", "\\", "\n", "\x01", "\u2028", "word "}
	switch k := rng.IntN(10); {
	case k < 3 || depth > 3:
		var b strings.Builder
		for range rng.IntN(400) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	case k < 4:
		return json.Number(fmt.Sprint(rng.IntN(1_000_000)))
	case k < 5:
		return []any{nil, true, false}[rng.IntN(3)]
	case k < 7:
		arr := make([]any, rng.IntN(12))
		for i := range arr {
			arr[i] = randomValue(rng, depth+1)
		}
		return arr
	default:
		obj := map[string]any{}
		for range rng.IntN(6) {
			obj[pieces[rng.IntN(len(pieces))]+fmt.Sprint(rng.IntN(100))] = randomValue(rng, depth+1)
		}
		return obj
	}
}

func FuzzShape(f *testing.F) {
	f.Add([]byte(`{"results":[{"id":"a","snippet":"hello"},{"id":"b","snippet":"world"}]}`), uint16(40))
	f.Add([]byte(`"plain text with é and 😀"`), uint16(10))
	f.Add([]byte(`[1,2,3,4,5,6,7,8,9,10]`), uint16(12))
	f.Add([]byte(`{"a":{"b":{"c":[{"d":"<<<>>>&&&"}]}}}`), uint16(30))
	f.Add([]byte("not json \xff\xfe"), uint16(5))
	f.Fuzz(func(t *testing.T, in []byte, budget16 uint16) {
		budget := int(budget16 % 4096)
		var v any
		dec := json.NewDecoder(strings.NewReader(string(in)))
		dec.UseNumber()
		if dec.Decode(&v) != nil {
			v = string(in) // not JSON: shape it as text
		}
		out, truncated := orchestrator.Shape(v, budget)
		b, err := json.Marshal(out)
		if err != nil {
			t.Fatalf("shaped value does not encode: %v", err)
		}
		if len(b) > max(budget, 2) {
			t.Fatalf("shaped to %d bytes over budget %d: %s", len(b), budget, b)
		}
		if !truncated && !reflect.DeepEqual(out, v) {
			t.Fatal("not truncated but changed")
		}
		again, tr := orchestrator.Shape(out, budget)
		if tr || !reflect.DeepEqual(again, out) {
			t.Fatalf("shaping an already-small value changed it: %s", b)
		}
	})
}

// BenchmarkShapeLargeSearchResult shapes a 1 MB result into the gateway's
// 64 KiB budget.
func BenchmarkShapeLargeSearchResult(b *testing.B) {
	results := make([]any, 1000)
	for i := range results {
		results[i] = map[string]any{"id": fmt.Sprint(i), "title": "Doc", "snippet": strings.Repeat("lorem é ", 128)}
	}
	data := map[string]any{"results": results}
	b.ReportAllocs()
	for b.Loop() {
		orchestrator.Shape(data, resultBudget)
	}
}
