package logescape

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// A user id that reverses the rest of the line (U+202E) or carries a
// newline, a C1 control or a zero-width space reaches the log escaped, in
// both of slog's formats, as a value and inside an error's text.
func TestClientStringsAreEscapedInJSONAndTextLogs(t *testing.T) {
	user := "alice\u202egnp.exe\n\u009b31m\u200b"
	for name, newHandler := range map[string]func(*bytes.Buffer) slog.Handler{
		"json": func(b *bytes.Buffer) slog.Handler {
			return slog.NewJSONHandler(b, &slog.HandlerOptions{ReplaceAttr: ReplaceAttr})
		},
		"text": func(b *bytes.Buffer) slog.Handler {
			return slog.NewTextHandler(b, &slog.HandlerOptions{ReplaceAttr: ReplaceAttr})
		},
	} {
		var buf bytes.Buffer
		slog.New(newHandler(&buf)).Info("connection refused", "user", user, "err", errors.New("sub "+user+": refused"))
		line := buf.String()
		if strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") {
			t.Errorf("%s: the line is split: %q", name, line)
		}
		for _, raw := range []string{"\u202e", "\u009b", "\u200b"} {
			if strings.Contains(line, raw) {
				t.Errorf("%s: %U written raw: %q", name, []rune(raw)[0], line)
			}
		}
		if strings.Count(line, `\u202e`) != 2 {
			t.Errorf("%s: U+202E not written as \\u202e in the value and the error: %q", name, line)
		}
	}
	// Decoded, the JSON line says what the client sent, visibly.
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: ReplaceAttr})).Info("m", "user", user)
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if want := `alice\u202egnp.exe` + "\n" + `\u009b31m\u200b`; rec["user"] != want {
		t.Errorf("decoded user %q, want %q", rec["user"], want)
	}
}

func TestPlainTextIsUnchanged(t *testing.T) {
	for _, s := range []string{"alice", "Zoë Ångström", "日本語", "tab\tand newline\n", ""} {
		if got := String(s); got != s {
			t.Errorf("String(%q) = %q", s, got)
		}
	}
}

func BenchmarkReplaceAttrASCII(b *testing.B) {
	a := slog.String("user", "user-1234567890@example.com")
	b.ReportAllocs()
	for b.Loop() {
		_ = ReplaceAttr(nil, a)
	}
}
