package kb

import (
	"regexp"
	"strings"
)

// splitTitle returns the text of the first heading (ATX "# x" or setext
// "x" over "===" / "---") and the Markdown that remains without it. Without
// a heading the title is empty and the body is the whole text.
func splitTitle(md string) (title, body string) {
	lines := strings.Split(strings.ReplaceAll(md, "\r\n", "\n"), "\n")
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" {
			continue
		}
		if t, ok := atxHeading(trimmed); ok {
			return t, joinWithout(lines, i, i+1)
		}
		if i+1 < len(lines) && isUnderline(strings.TrimSpace(lines[i+1])) {
			return inlineText(trimmed), joinWithout(lines, i, i+2)
		}
		// Skip other lines until a heading: the title is the first heading.
	}
	return "", strings.TrimSpace(md)
}

func atxHeading(line string) (string, bool) {
	level := len(line) - len(strings.TrimLeft(line, "#"))
	if level == 0 || level > 6 {
		return "", false
	}
	rest := line[level:]
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return "", false // "#hashtag" is not a heading
	}
	rest = strings.TrimSpace(strings.TrimRight(strings.TrimSpace(rest), "#"))
	return inlineText(rest), true
}

func isUnderline(line string) bool {
	return len(line) >= 2 && (strings.Trim(line, "=") == "" || strings.Trim(line, "-") == "")
}

func joinWithout(lines []string, from, to int) string {
	rest := append(append([]string(nil), lines[:from]...), lines[to:]...)
	return strings.TrimSpace(strings.Join(rest, "\n"))
}

var (
	imageRe    = regexp.MustCompile(`!\[([^\]]*)\]\([^)]*\)`)
	linkRe     = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	tagRe      = regexp.MustCompile(`</?[a-zA-Z][^>]*>`)
	emphasisRe = regexp.MustCompile("(\\*\\*|__|\\*|`+|~~)")
	listRe     = regexp.MustCompile(`^(\s*([-*+]|\d+[.)])\s+|\s*>\s?|#{1,6}\s+)`)
)

// inlineText strips inline Markdown (links, images, emphasis, code marks,
// HTML tags) and keeps the words.
func inlineText(s string) string {
	s = imageRe.ReplaceAllString(s, "$1")
	s = linkRe.ReplaceAllString(s, "$1")
	s = tagRe.ReplaceAllString(s, "")
	s = emphasisRe.ReplaceAllString(s, "")
	return strings.TrimSpace(s)
}

// plainText turns a Markdown body into the plain prose that is indexed and
// cut into snippets: markup removed, whitespace collapsed to single spaces.
func plainText(md string) string {
	var parts []string
	for line := range strings.SplitSeq(md, "\n") {
		line = listRe.ReplaceAllString(line, "")
		if t := strings.TrimSpace(line); t == "" || isUnderline(t) || strings.HasPrefix(t, "```") {
			continue
		}
		parts = append(parts, inlineText(line))
	}
	return strings.Join(strings.Fields(strings.Join(parts, " ")), " ")
}
