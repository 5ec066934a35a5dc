package protocol

import (
	"strings"
	"unicode/utf8"
)

// StripControl returns s without control characters: NUL and the other C0
// controls (U+0000–U+001F) except tab, newline and carriage return, DEL
// (U+007F), and the C1 controls (U+0080–U+009F). Each byte that is not
// valid UTF-8 becomes U+FFFD, as JSON encoding would make it, so the result
// is always valid UTF-8 (and stripping cannot join stray bytes into a new
// control character). A string with nothing to change is returned as it
// is, without allocating; the cost is one pass over s.
//
// The gateway strips rather than refuses: user text, tool results and model
// output may carry stray control bytes (a pasted terminal escape, a
// backend's NUL padding), and the turn goes on without them.
func StripControl(s string) string {
	if !needsStrip(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteRune(utf8.RuneError)
		case !isControl(r):
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}

// HasControl reports whether StripControl would change s.
func HasControl(s string) bool { return needsStrip(s) }

func needsStrip(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if asciiControl[c] {
				return true
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r <= 0x9f || r == utf8.RuneError && n == 1 {
			return true // C1 (U+0080–U+009F), or not UTF-8
		}
		i += n
	}
	return false
}

// asciiControl marks the ASCII bytes StripControl removes.
var asciiControl = [utf8.RuneSelf]bool{
	0x00: true, 0x01: true, 0x02: true, 0x03: true, 0x04: true, 0x05: true, 0x06: true, 0x07: true,
	0x08: true, 0x0b: true, 0x0c: true, 0x0e: true, 0x0f: true,
	0x10: true, 0x11: true, 0x12: true, 0x13: true, 0x14: true, 0x15: true, 0x16: true, 0x17: true,
	0x18: true, 0x19: true, 0x1a: true, 0x1b: true, 0x1c: true, 0x1d: true, 0x1e: true, 0x1f: true,
	0x7f: true,
}

// isControl reports whether StripControl removes r.
func isControl(r rune) bool {
	return r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r >= 0x7f && r <= 0x9f
}
