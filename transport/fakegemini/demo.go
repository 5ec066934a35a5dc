package fakegemini

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"google.golang.org/genai"
)

// DemoBrain is the offline default's model: deterministic rules that answer
// greetings and help requests, look every other question up with kb_search,
// open the best hit with kb_get and quote it. It reads tool responses as
// plain maps: {"output": ...} on success, {"error":
// {"type","message","retryable"}} on failure. Typed "/call NAME {json
// args}" calls any declared tool (see demo_call.go) and then summarises
// its result.
type DemoBrain struct {
	// Pace is waited before every streamed text chunk but the first, so that
	// answers visibly stream. Zero sends them at once.
	Pace time.Duration
}

// NewDemo returns a DemoBrain that streams without pauses.
func NewDemo() *DemoBrain { return &DemoBrain{} }

const (
	demoGreeting = "Hello! I'm the offline demo model, so I can't chat freely, but I can look things up " +
		"in the knowledge base. Ask me a question about it and I'll search for the answer."
	demoHelp = "I'm the offline demo model: I don't really understand language, but I can search the " +
		"knowledge base for you. Ask a question and I'll run kb_search, open the best match with kb_get, " +
		"and tell you what it says."
	demoNothing = "I couldn't find anything about that in the knowledge base. Try other words, or ask about another topic."
	// excerptLimit bounds the quoted part of a document, in runes.
	excerptLimit = 600
)

// Respond answers according to the last content of the conversation.
func (d *DemoBrain) Respond(_ context.Context, req *Request) Reply {
	var last *genai.Content
	if n := len(req.Contents); n > 0 {
		last = req.Contents[n-1]
	}
	if rs := functionResponses(last); len(rs) > 0 {
		if _, ok := parseSlashCall(lastUserText(req.Contents)); ok {
			return d.summarize(rs)
		}
		return d.afterTools(rs)
	}
	text := strings.TrimSpace(userText(last))
	if c, ok := parseSlashCall(text); ok {
		c.checkDeclared(declaredNames(req.Tools))
		if c.problem != "" {
			return d.say(c.problem)
		}
		return CallReply(Call{Name: c.name, Args: c.args})
	}
	switch {
	case text == "":
		return d.say("I didn't catch a question. Ask me something about the knowledge base.")
	case isGreeting(text):
		return d.say(demoGreeting)
	case isHelp(text):
		return d.say(demoHelp)
	}
	return CallReply(Call{Name: "kb_search", Args: map[string]any{"query": text, "limit": 3}})
}

// afterTools answers the tool responses of the last turn: a failure first,
// then a fetched document, then search results.
func (d *DemoBrain) afterTools(rs []*genai.FunctionResponse) Reply {
	for _, r := range rs {
		if e, ok := r.Response["error"].(map[string]any); ok {
			msg, _ := e["message"].(string)
			if msg == "" {
				msg = "no reason given"
			}
			text := fmt.Sprintf("Sorry, the %s tool failed: %s", r.Name, msg)
			if retry, _ := e["retryable"].(bool); retry {
				text += " You can try again in a moment."
			}
			return d.say(text)
		}
	}
	for _, r := range rs {
		if r.Name == "kb_get" {
			out, _ := r.Response["output"].(map[string]any)
			title, _ := out["title"].(string)
			body, _ := out["body"].(string)
			ex := excerpt(body)
			if ex == "" {
				ex = "the document is empty."
			}
			return d.say(fmt.Sprintf("From “%s”: %s", title, ex))
		}
	}
	for _, r := range rs {
		if r.Name == "kb_search" {
			out, _ := r.Response["output"].(map[string]any)
			results, _ := out["results"].([]any)
			if len(results) == 0 {
				return d.say(demoNothing)
			}
			first, _ := results[0].(map[string]any)
			id, _ := first["id"].(string)
			if id == "" {
				return d.say("The knowledge base answered with a result I can't open (it has no id).")
			}
			return CallReply(Call{Name: "kb_get", Args: map[string]any{"id": id}})
		}
	}
	return d.say(fmt.Sprintf("I got an answer from %s, but the demo model only knows kb_search and kb_get.", rs[0].Name))
}

// summarize answers the responses to a /call with what each tool said.
func (d *DemoBrain) summarize(rs []*genai.FunctionResponse) Reply {
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		parts = append(parts, summarizeResult(r.Name, r.Response))
	}
	return d.say(strings.Join(parts, " "))
}

// say streams text in a few chunks, paced by d.Pace.
func (d *DemoBrain) say(text string) Reply {
	r := TextReply(text, 4)
	for i := 1; i < len(r.Chunks); i++ {
		r.Chunks[i].Delay = d.Pace
	}
	return r
}

func functionResponses(c *genai.Content) []*genai.FunctionResponse {
	if c == nil {
		return nil
	}
	var out []*genai.FunctionResponse
	for _, p := range c.Parts {
		if p != nil && p.FunctionResponse != nil {
			out = append(out, p.FunctionResponse)
		}
	}
	return out
}

func userText(c *genai.Content) string {
	if c == nil || (c.Role != "" && c.Role != genai.RoleUser) {
		return ""
	}
	var b strings.Builder
	for _, p := range c.Parts {
		if p != nil && !p.Thought {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

var greetingWords = map[string]bool{
	"hi": true, "hello": true, "hey": true, "hiya": true, "howdy": true, "greetings": true, "yo": true,
	"hallo": true, "good": true, "morning": true, "afternoon": true, "evening": true, "day": true,
	"there": true, "everyone": true, "all": true, "folks": true, "you": true,
}

// isGreeting reports whether text is only a greeting ("hi", "hello there",
// "good morning!"), not a question that starts with one.
func isGreeting(text string) bool {
	words := wordsOf(text)
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
	words := wordsOf(text)
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

func wordsOf(text string) []string {
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
	return truncateWords(text, excerptLimit)
}

// truncateWords cuts text to at most limit runes at a word boundary and
// marks the cut with an ellipsis.
func truncateWords(text string, limit int) string {
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
