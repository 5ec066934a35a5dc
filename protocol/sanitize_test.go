package protocol

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestStripControlRemovesControlsAndKeepsLayout(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", ""},
		{"plain text", "plain text"},
		{"keep\ttabs\nnewlines\r\nand returns", "keep\ttabs\nnewlines\r\nand returns"},
		{"nul\x00byte", "nulbyte"},
		{"\x00\x01\x02\x1f", ""},
		{"bell\a and escape\x1b[0m", "bell and escape[0m"},
		{"del\x7f", "del"},
		{"c1 \u0080\u0085\u009f controls", "c1  controls"},
		{"not c1: \u00a0é\u00ff €", "not c1: \u00a0é\u00ff €"},
		{"invalid \xff\xfe utf-8 \xc2 replaced", "invalid \ufffd\ufffd utf-8 \ufffd replaced"},
		{"\xc2\x1b\x83", "\ufffd\ufffd"}, // stripping never joins bytes into a control
		{"\x00leading and trailing\x00", "leading and trailing"},
	}
	for _, c := range cases {
		if got := StripControl(c.in); got != c.want {
			t.Errorf("StripControl(%q) = %q, want %q", c.in, got, c.want)
		}
		if HasControl(c.in) != (c.in != c.want) {
			t.Errorf("HasControl(%q) = %v", c.in, HasControl(c.in))
		}
	}
}

func TestStripControlDoesNotAllocateForCleanText(t *testing.T) {
	s := strings.Repeat("clean text\n", 100)
	if n := testing.AllocsPerRun(100, func() { _ = StripControl(s) }); n != 0 {
		t.Errorf("%v allocations for a clean string, want 0", n)
	}
}

// stripped is the reference: every rune that is not a control character
// (C0 but tab, newline and return; DEL; C1), each byte of invalid UTF-8 as
// U+FFFD.
func stripped(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else if !(r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r >= 0x7f && r <= 0x9f) {
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}

func FuzzStripControl(f *testing.F) {
	for _, s := range []string{"", "hello", "a\x00b", "\r\n\t", "\x1b[1m", "\u0085", "\xc2", "\xc2\x85\xc2", "\xff\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := StripControl(s)
		if want := stripped(s); got != want {
			t.Fatalf("StripControl(%q) = %q, want %q", s, got, want)
		}
		if HasControl(got) {
			t.Fatalf("StripControl(%q) = %q still has control characters", s, got)
		}
		if again := StripControl(got); again != got {
			t.Fatalf("not idempotent: %q then %q", got, again)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("StripControl(%q) = %q is not valid UTF-8", s, got)
		}
		if HasControl(s) != (got != s) {
			t.Fatalf("HasControl(%q) = %v but StripControl changed it: %v", s, HasControl(s), got != s)
		}
	})
}

func BenchmarkHasControlCleanText(b *testing.B) {
	s := strings.Repeat("Refunds are issued within five business days, café. ", 20)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if HasControl(s) {
			b.Fatal("clean text has controls")
		}
	}
}
