package orchestrator

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// minShapeBytes is the smallest budget Shape honours: the size of "", the
// last thing it falls back to. Smaller budgets are raised to it.
const minShapeBytes = 2

// minShapedElement is the least room worth shaping an array's first
// element into when not even it fits whole; with less, the array is only
// its sentinel.
const minShapedElement = 16

// Shape returns data cut down so that its JSON encoding (as json.Marshal
// writes it, HTML escaping included, which no encoder exceeds) is at most
// maxBytes, and whether anything was cut. A value that already fits is
// returned as it is. Otherwise the result is built from the value's JSON
// form, keeping its shape where it can:
//   - a string keeps its longest prefix that fits, cut on a UTF-8 boundary,
//     plus "… [truncated N bytes]" (N counts the bytes of the string cut
//     off); with no room for that, "…" or "";
//   - an array keeps its leading elements that fit whole and ends with
//     {"_truncated": true, "omitted": K}; when not even the first element
//     fits, it is shaped into the room left (and K may be 0);
//   - an object keeps all its members: small ones whole, the big ones
//     shaped into an even share of the room left (any slack passing to the
//     bigger ones), so {"results": [...]} keeps its shape with fewer
//     results;
//   - anything that cannot keep its shape (an object whose keys alone are
//     too big, an array with no room for its sentinel, a huge number)
//     becomes {"_truncated_json": "<prefix of its JSON text>",
//     "originalBytes": N}, or with no room for that, a cut string of its
//     JSON text.
//
// A value json.Marshal cannot encode becomes a short explanatory string.
// maxBytes below 2 is taken as 2. Cutting costs a few passes over the
// encoding and memory proportional to the number of values in it.
func Shape(data any, maxBytes int) (shaped any, truncated bool) {
	shaped, _, truncated = shape(data, maxBytes)
	return shaped, truncated
}

// shape is Shape that also returns the number of characters of the shaped
// value's JSON encoding (not bytes: seed 004 sizes responses in
// characters), which the pipeline records, so that it is not encoded
// again.
func shape(data any, maxBytes int) (shaped any, chars int, truncated bool) {
	maxBytes = max(maxBytes, minShapeBytes)
	raw, err := json.Marshal(data)
	if err != nil {
		s := shapeString("[the tool result could not be encoded as JSON]", maxBytes)
		return s, quotedChars(s), true
	}
	if len(raw) <= maxBytes {
		return data, utf8.RuneCount(raw), false
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		// Only nesting deeper than the decoder allows gets here.
		shaped, _ = wrapJSONText(raw, maxBytes)
	} else {
		tree := measure(v)
		shaped, _ = shapeValue(v, &tree, maxBytes)
	}
	// The sizes above mirror json.Marshal; this check keeps the promise
	// even if they ever drift from it.
	b, err := json.Marshal(shaped)
	if err != nil || len(b) > maxBytes {
		s := shapeString(string(raw), maxBytes)
		return s, quotedChars(s), true
	}
	return shaped, utf8.RuneCount(b), true
}

// sizeTree holds the encoded size of a decoded JSON value and of
// everything inside it, so shaping a deep value measures each part once.
type sizeTree struct {
	size int
	kids []sizeTree // arrays: per element; objects: per key, in keys order
	keys []string   // objects: sorted keys
}

func measure(v any) sizeTree {
	switch v := v.(type) {
	case []any:
		t := sizeTree{size: 2 + max(len(v)-1, 0), kids: make([]sizeTree, len(v))}
		for i, e := range v {
			t.kids[i] = measure(e)
			t.size += t.kids[i].size
		}
		return t
	case map[string]any:
		t := sizeTree{size: 2 + max(len(v)-1, 0), kids: make([]sizeTree, len(v)), keys: make([]string, 0, len(v))}
		for k := range v {
			t.keys = append(t.keys, k)
		}
		slices.Sort(t.keys)
		for i, k := range t.keys {
			t.kids[i] = measure(v[k])
			t.size += quotedSize(k) + 1 + t.kids[i].size
		}
		return t
	default:
		return sizeTree{size: jsonSize(v)}
	}
}

// shapeValue shapes a decoded JSON value measured by t into budget bytes
// and returns the result with its encoded size.
func shapeValue(v any, t *sizeTree, budget int) (any, int) {
	if t.size <= budget {
		return v, t.size
	}
	switch v := v.(type) {
	case string:
		s := shapeString(v, budget)
		return s, quotedSize(s)
	case []any:
		if out, size, ok := shapeArray(v, t, budget); ok {
			return out, size
		}
	case map[string]any:
		if out, size, ok := shapeObject(v, t, budget); ok {
			return out, size
		}
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return "", quotedSize("")
	}
	return wrapJSONText(raw, budget)
}

// shapeString cuts s so that its encoding fits budget; see Shape.
func shapeString(s string, budget int) string {
	if quotedSize(s) <= budget {
		return s
	}
	room := budget - 2
	if suffixMax := truncSuffix(len(s)); quotedSize(suffixMax) <= budget {
		cut := prefixWithin(s, room-(quotedSize(suffixMax)-2))
		return s[:cut] + truncSuffix(len(s)-cut)
	}
	const ellipsis = "…"
	if room >= len(ellipsis) {
		return s[:prefixWithin(s, room-len(ellipsis))] + ellipsis
	}
	return ""
}

func truncSuffix(n int) string {
	return "… [truncated " + strconv.Itoa(n) + " bytes]"
}

// prefixWithin returns the length of the longest prefix of s, ending on a
// rune boundary, whose encoding (without quotes) is at most room bytes.
func prefixWithin(s string, room int) int {
	used := 0
	for i, r := range s {
		c := runeCost(r, s[i:], false)
		if used+c > room {
			return i
		}
		used += c
	}
	return len(s)
}

// shapeArray keeps the leading elements that fit and appends the sentinel;
// ok is false when not even the sentinel fits.
func shapeArray(arr []any, t *sizeTree, budget int) (out []any, size int, ok bool) {
	// Layout: '[' + (element ',')* + sentinel + ']'; the sentinel is
	// reserved at its largest, with every element omitted.
	room := budget - 2 - jsonSize(arraySentinel(len(arr)))
	if room < 0 {
		return nil, 0, false
	}
	kept := make([]any, 0, min(len(arr), 64))
	used := 0
	for i, e := range arr {
		if used+t.kids[i].size+1 <= room {
			kept = append(kept, e)
			used += t.kids[i].size + 1
			continue
		}
		if i == 0 && room-1 >= minShapedElement {
			shaped, n := shapeValue(e, &t.kids[i], room-1)
			kept = append(kept, shaped)
			used += n + 1
		}
		break
	}
	sentinel := arraySentinel(len(arr) - len(kept))
	return append(kept, sentinel), 2 + used + jsonSize(sentinel), true
}

func arraySentinel(omitted int) map[string]any {
	return map[string]any{"_truncated": true, "omitted": omitted}
}

// shapeObject keeps every member, shaping the biggest values into an even
// share of the room their keys leave; ok is false when the result still
// does not fit.
func shapeObject(obj map[string]any, t *sizeTree, budget int) (out map[string]any, size int, ok bool) {
	room := budget - 2 - max(len(obj)-1, 0)
	for _, k := range t.keys {
		room -= quotedSize(k) + 1
	}
	if room < 0 {
		return nil, 0, false
	}
	// Smallest first, so every value that fits its share is kept whole and
	// what it leaves over goes to the bigger ones after it.
	order := make([]int, len(t.keys))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(t.kids[a].size, t.kids[b].size) })
	out = make(map[string]any, len(obj))
	size = budget - room
	for n, i := range order {
		share := room / (len(order) - n)
		v, vs := shapeValue(obj[t.keys[i]], &t.kids[i], share)
		if vs > share {
			return nil, 0, false
		}
		out[t.keys[i]] = v
		room -= vs
		size += vs
	}
	return out, size, true
}

// wrapJSONText is the last resort that still shows the model the start of
// the value: {"_truncated_json": prefix, "originalBytes": N}, or a cut
// string when even that does not fit.
func wrapJSONText(raw []byte, budget int) (any, int) {
	text := string(raw)
	w := map[string]any{"_truncated_json": "", "originalBytes": len(raw)}
	room := budget - jsonSize(w)
	if room < 0 {
		s := shapeString(text, budget)
		return s, quotedSize(s)
	}
	prefix := text[:prefixWithin(text, room)]
	w["_truncated_json"] = prefix
	return w, budget - room + quotedSize(prefix) - 2
}
