package kb

import (
	"sort"
	"strings"
	"unicode/utf8"
)

// snippetLen is the most bytes of document text a snippet holds; with the
// "…" marks on both sides it stays under 240 characters.
const snippetLen = 230

// span is one match of a query term in the plain body, in byte offsets.
type span struct {
	start, end int
	term       string
}

// snippet cuts a window of at most size bytes out of text around the densest
// cluster of matches (most distinct terms, then most matches, then the
// earliest), widened with some context before it, snapped to word
// boundaries and marked with "…" where text was cut. With no matches it is
// the start of the text.
func snippet(text string, spans []span, size int) string {
	if len(text) <= size {
		return text
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	from, to := 0, 0
	best, bestCount := -1, -1
	for i := range spans {
		terms := map[string]bool{}
		count, last := 0, spans[i].end
		for j := i; j < len(spans) && spans[j].end-spans[i].start <= size; j++ {
			terms[spans[j].term] = true
			count++
			last = spans[j].end
		}
		if len(terms) > best || (len(terms) == best && count > bestCount) {
			best, bestCount = len(terms), count
			from, to = spans[i].start, last
		}
	}
	// Give the matches some context before them, then fill the window.
	start := max(0, from-(size-(to-from))/3)
	end := min(len(text), start+size)
	start = max(0, end-size)
	return cut(text, start, end)
}

// cut returns text[start:end] moved inwards to whole words, with "…" where
// the document goes on.
func cut(text string, start, end int) string {
	if start > 0 {
		if i := strings.IndexByte(text[start:end], ' '); i >= 0 && i < 40 {
			start += i + 1
		} else {
			for start < end && !utf8.RuneStart(text[start]) {
				start++
			}
		}
	}
	if end < len(text) {
		if i := strings.LastIndexByte(text[start:end], ' '); i > 0 && end-(start+i) < 40 {
			end = start + i
		} else {
			for end > start && !utf8.RuneStart(text[end]) {
				end--
			}
		}
	}
	s := strings.TrimSpace(text[start:end])
	s = strings.TrimRight(s, ",;:")
	if start > 0 {
		s = "…" + s
	}
	if end < len(text) {
		s += "…"
	}
	return s
}
