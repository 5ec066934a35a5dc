package orchestrator

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// jsonSize is the length in bytes of json.Marshal(v) for the values Shape
// builds: decoded JSON (nil, bool, json.Number, string, []any,
// map[string]any) and ints. Other types are measured by encoding them.
// Shape budgets in bytes, what a message's size limit counts.
func jsonSize(v any) int { return jsonLen(v, false) }

// jsonChars is the number of characters (Unicode code points) of
// json.Marshal(v), measured as jsonSize measures bytes: the unit of seed
// 004's response sizes and token estimates, which a non-ASCII result
// would overstate up to four times in bytes.
func jsonChars(v any) int { return jsonLen(v, true) }

// jsonLen is jsonSize (chars false) or jsonChars (chars true).
func jsonLen(v any, chars bool) int {
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
		return quotedLen(v, chars)
	case []any:
		n := 2 + max(len(v)-1, 0)
		for _, e := range v {
			n += jsonLen(e, chars)
		}
		return n
	case map[string]any:
		n := 2 + max(len(v)-1, 0)
		for k, e := range v {
			n += quotedLen(k, chars) + 1 + jsonLen(e, chars)
		}
		return n
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return 0
		}
		if chars {
			return utf8.RuneCount(b)
		}
		return len(b)
	}
}

// quotedSize is the length in bytes of s encoded as a JSON string, quotes
// included.
func quotedSize(s string) int { return quotedLen(s, false) }

// quotedChars is the number of characters of s encoded as a JSON string,
// quotes included.
func quotedChars(s string) int { return quotedLen(s, true) }

func quotedLen(s string, chars bool) int {
	n := 2
	for i, r := range s {
		n += runeCost(r, s[i:], chars)
	}
	return n
}

// runeCost is how many bytes (chars false) or characters (chars true)
// encoding/json writes for the rune r that starts rest: it escapes <, >
// and & (HTML safety), U+2028 and U+2029, and control characters, all in
// ASCII, and writes each invalid byte as \ufffd.
func runeCost(r rune, rest string, chars bool) int {
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
	if chars {
		return 1
	}
	return utf8.RuneLen(r)
}
