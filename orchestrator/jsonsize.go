package orchestrator

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// jsonSize is the length of json.Marshal(v) for the values Shape builds:
// decoded JSON (nil, bool, json.Number, string, []any, map[string]any) and
// ints. Other types are measured by encoding them.
func jsonSize(v any) int {
	switch v := v.(type) {
	case nil:
		return len("null")
	case bool:
		if v {
			return len("true")
		}
		return len("false")
	case json.Number:
		if v == "" {
			return 1 // encoded as 0
		}
		return len(v)
	case int:
		return len(strconv.Itoa(v))
	case string:
		return quotedSize(v)
	case []any:
		n := 2 + max(len(v)-1, 0)
		for _, e := range v {
			n += jsonSize(e)
		}
		return n
	case map[string]any:
		n := 2 + max(len(v)-1, 0)
		for k, e := range v {
			n += quotedSize(k) + 1 + jsonSize(e)
		}
		return n
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return 0
		}
		return len(b)
	}
}

// quotedSize is the length of s encoded as a JSON string, quotes included.
func quotedSize(s string) int {
	n := 2
	for i, r := range s {
		n += runeCost(r, s[i:])
	}
	return n
}

// runeCost is how many bytes encoding/json writes for the rune r that
// starts rest: it escapes <, > and & (HTML safety), U+2028 and U+2029, and
// control characters, and writes each invalid byte as \ufffd.
func runeCost(r rune, rest string) int {
	if r < utf8.RuneSelf {
		switch r {
		case '"', '\\', '\b', '\f', '\n', '\r', '\t':
			return 2
		case '<', '>', '&':
			return 6
		}
		if r < 0x20 {
			return 6
		}
		return 1
	}
	if r == utf8.RuneError {
		if _, size := utf8.DecodeRuneInString(rest); size == 1 {
			return len(`\ufffd`)
		}
	}
	if r == '\u2028' || r == '\u2029' {
		return 6
	}
	return utf8.RuneLen(r)
}
