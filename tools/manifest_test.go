package tools

import "testing"

func TestGuideSummaryIsFirstNonHeadingLine(t *testing.T) {
	cases := map[string]string{
		"# kb_search\n\nSearch the KB.\nMore.":    "Search the KB.",
		"\n\n  Plain first line.  \n# Heading":    "Plain first line.",
		"kb_get\n======\n\nRead a document.\n":    "Read a document.",
		"Title\n---\nSub\n---\nBody line.":        "Body line.",
		"# a\n## b\n### c\n":                      "",
		"":                                        "",
		"# tool\r\n\r\nWindows line endings.\r\n": "Windows line endings.",
	}
	for in, want := range cases {
		if got := guideSummary([]byte(in)); got != want {
			t.Errorf("guideSummary(%q) = %q, want %q", in, got, want)
		}
	}
}
