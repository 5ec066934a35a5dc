package fakeserve

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSplitTextKeepsEveryCharacter(t *testing.T) {
	cases := []struct {
		text   string
		pieces int
		want   int
	}{
		{"", 3, 1},
		{"a", 3, 1},
		{"abc", 5, 3},
		{"The quick brown fox jumps over the lazy dog", 4, 4},
		{"naïve café déjà vu", 3, 3},
		{"one", 0, 1},
	}
	for _, tc := range cases {
		parts := SplitText(tc.text, tc.pieces)
		if len(parts) != tc.want || strings.Join(parts, "") != tc.text {
			t.Errorf("SplitText(%q, %d) = %q, want %d parts joining to the text", tc.text, tc.pieces, parts, tc.want)
		}
		for _, p := range parts {
			if p == "" && tc.text != "" || !utf8.ValidString(p) {
				t.Errorf("SplitText(%q, %d) has a bad part %q", tc.text, tc.pieces, p)
			}
		}
	}
}
