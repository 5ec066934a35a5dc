// Package logescape keeps client-supplied text from forging or hiding log
// lines: characters a terminal or a log viewer would act on instead of
// showing — bidirectional overrides such as U+202E, other invisible format
// characters, the C1 controls — are written as \uXXXX escapes. slog's
// handlers already escape the C0 controls (a newline cannot start a forged
// line) but write these raw.
package logescape

import (
	"fmt"
	"log/slog"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ReplaceAttr is a slog.HandlerOptions.ReplaceAttr that escapes string
// values and error texts (where clients' text most often hides: a user id,
// a header, a key id quoted in an error). An ASCII string is only scanned.
func ReplaceAttr(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		if s := a.Value.String(); needs(s) {
			a.Value = slog.StringValue(String(s))
		}
	case slog.KindAny:
		if err, ok := a.Value.Any().(error); ok {
			if s := err.Error(); needs(s) {
				a.Value = slog.StringValue(String(s))
			}
		}
	}
	return a
}

// String returns s with every character a log viewer would act on rather
// than show written as \uXXXX (or \UXXXXXXXX); invalid UTF-8 is left to the
// handler, which writes U+FFFD.
func String(s string) string {
	if !needs(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 12)
	for _, r := range s {
		switch {
		case !escaped(r):
			b.WriteRune(r)
		case r <= 0xFFFF:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	return b.String()
}

func needs(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return strings.ContainsFunc(s[i:], escaped)
		}
	}
	return false
}

// escaped: the C1 controls, the format characters (bidi embeddings,
// overrides and isolates, zero-width characters, the BOM), and the line and
// paragraph separators. C0 controls are the handler's to escape.
func escaped(r rune) bool {
	return r >= 0x80 && (r <= 0x9f || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029')
}
