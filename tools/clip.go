package tools

import (
	"strings"
	"unicode/utf8"
)

// Clip shortens s to at most n runes, marking a cut with "…", and replaces
// control characters with spaces so that a message quoting s (a service's
// error text, a rejected value) stays on one line.
func Clip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}
