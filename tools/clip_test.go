package tools_test

import (
	"testing"

	"github.com/turnstile-gw/turnstile/tools"
)

func TestClipKeepsQuotedTextShortAndOnOneLine(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"a longer message", 8, "a longer…"},
		{"déjà vu déjà vu", 4, "déjà…"},
		{"line one\nline two\r\tend\x7f", 100, "line one line two  end "},
		{"", 3, ""},
	}
	for _, tc := range cases {
		if got := tools.Clip(tc.in, tc.n); got != tc.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
