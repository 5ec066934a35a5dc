package fakedemo

import (
	"regexp"
	"strings"
)

// excerptLimit bounds the quoted part of a document, in runes.
const excerptLimit = 600

var greetingWords = map[string]bool{
	"hi": true, "hello": true, "hey": true, "hiya": true, "howdy": true, "greetings": true, "yo": true,
	"hallo": true, "good": true, "morning": true, "afternoon": true, "evening": true, "day": true,
	"there": true, "everyone": true, "all": true, "folks": true, "you": true,
}

// isGreeting reports whether text is only a greeting ("hi", "hello there",
// "good morning!"), not a question that starts with one.
func isGreeting(text string) bool {
	words := Words(text)
	if len(words) == 0 || len(words) > 4 || words[0] == "there" || words[0] == "you" {
		return false
	}
	for _, w := range words {
		if !greetingWords[w] {
			return false
		}
	}
	return true
}

// isHelp reports whether text asks what the model can do.
func isHelp(text string) bool {
	words := Words(text)
	joined := " " + strings.Join(words, " ") + " "
	for _, phrase := range []string{" what can you do ", " who are you ", " what are you ", " how does this work "} {
		if strings.Contains(joined, phrase) {
			return true
		}
	}
	if len(words) > 3 {
		return false
	}
	for _, w := range words {
		if w == "help" {
			return true
		}
	}
	return false
}

// Words splits text into lower-case words of letters, digits and
// apostrophes.
func Words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '\'')
	})
}

var (
	mdImage    = regexp.MustCompile(`!\[([^\]]*)\]\([^)]*\)`)
	mdLink     = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	mdEmphasis = regexp.MustCompile("(\\*+|__|`)")
	mdListItem = regexp.MustCompile(`^\s*(?:[-*+]|\d+[.)])\s+`)
	mdRule     = regexp.MustCompile(`^\s*(?:[-=*_]\s*){3,}$`)
)

// excerpt returns the first paragraph of a Markdown body as plain text, or
// the first two when the first is short, capped at excerptLimit runes.
func excerpt(body string) string {
	var paras []string
	var cur []string
	inFence := false
	flush := func() {
		if len(cur) > 0 {
			paras = append(paras, strings.Join(cur, " "))
			cur = nil
		}
	}
	for _, line := range strings.Split(body, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "```"):
			inFence = !inFence
			flush()
			continue
		case inFence:
			continue
		case trimmed == "" || strings.HasPrefix(trimmed, "#") || mdRule.MatchString(trimmed):
			flush()
			continue
		}
		trimmed = strings.TrimSpace(strings.TrimLeft(trimmed, ">"))
		trimmed = mdListItem.ReplaceAllString(trimmed, "")
		trimmed = mdImage.ReplaceAllString(trimmed, "$1")
		trimmed = mdLink.ReplaceAllString(trimmed, "$1")
		trimmed = mdEmphasis.ReplaceAllString(trimmed, "")
		if trimmed != "" {
			cur = append(cur, trimmed)
		}
	}
	flush()
	if len(paras) == 0 {
		return ""
	}
	text := paras[0]
	if len([]rune(text)) < 200 && len(paras) > 1 {
		text += " " + paras[1]
	}
	return TruncateWords(text, excerptLimit)
}

// TruncateWords cuts text to at most limit runes at a word boundary and
// marks the cut with an ellipsis.
func TruncateWords(text string, limit int) string {
	runes := []rune(text)
	if len(runes) <= limit {
		return text
	}
	cut := limit - 1
	for i := cut; i > limit/2; i-- {
		if runes[i] == ' ' {
			cut = i
			break
		}
	}
	return strings.TrimRight(string(runes[:cut]), " ,;:") + "…"
}
