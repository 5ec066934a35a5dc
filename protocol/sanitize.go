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
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c < utf8.RuneSelf:
			if c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == 0x7f {
				return true
			}
		case c == 0xc2 && i+1 < len(s) && s[i+1] >= 0x80 && s[i+1] <= 0x9f:
			return true // U+0080–U+009F encode as C2 80 … C2 9F
		}
	}
	return !utf8.ValidString(s)
}

// isControl reports whether StripControl removes r.
func isControl(r rune) bool {
	return r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r >= 0x7f && r <= 0x9f
}
