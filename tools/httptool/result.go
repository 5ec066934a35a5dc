package httptool

import (
	"strconv"
	"strings"
)

// pick is the result of a 2xx answer for a manifest with http.result: an
// object holding, under each JSON pointer (RFC 6901) as written, the value
// it points at in the answer; a pointer that points at nothing is left
// out. So the model gets the fields it needs, not a large body whole. An
// empty answer stays no data.
func pick(data any, pointers []string) any {
	if data == nil {
		return nil
	}
	out := make(map[string]any, len(pointers))
	for _, p := range pointers {
		if v, ok := resolve(data, p); ok {
			out[p] = v
		}
	}
	return out
}

// resolve evaluates the JSON pointer p (already checked to be one by the
// manifest schema) against doc, as decoded by decodeBody.
func resolve(doc any, p string) (any, bool) {
	if p == "" {
		return doc, true
	}
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v := doc.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return nil, false
			}
			doc = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) || tok != strconv.Itoa(i) {
				return nil, false // "-", leading zeros and signs index nothing
			}
			doc = v[i]
		default:
			return nil, false
		}
	}
	return doc, true
}
