// Package fakedemo holds the offline demo model's rules, shared by the fake
// model servers (fake Gemini, fake OpenAI): deterministic answers to
// greetings and help requests, a knowledge-base lookup (kb_search, then
// kb_get on the best hit, then a quote) for every other question, and
// "/call NAME {json}" to call any declared tool by hand. It knows nothing of
// wire formats: each fake turns its request into an Input and the Action
// back into its own reply.
package fakedemo

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Input is what the demo model reads of a conversation.
type Input struct {
	// Text is the last user message when the conversation ends with one.
	Text string
	// Results are the tool results when the conversation ends with them.
	Results []Result
	// LastUser is the newest user message, also when tool results follow
	// it: results that answer a "/call" are reported as they are.
	LastUser string
	// Tools are the names of the declared tools.
	Tools []string
	// Earlier are the model's calls earlier in the conversation, oldest
	// first: an approved call is repeated from them.
	Earlier []Call
	// RawArgs says the provider carries arguments as text, so "/call" with
	// arguments that are not a JSON object is sent as typed (to exercise
	// the gateway's invalid-arguments path). Otherwise such a "/call" is
	// answered with an explanation.
	RawArgs bool
}

// Result is one tool result as the model received it: Response is
// {"output": ...} on success, {"error": {"type","message","retryable"}} on
// failure.
type Result struct {
	Name     string
	Response map[string]any
}

// Action is what the demo model does next: say Text, or make Calls.
type Action struct {
	Text  string
	Calls []Call
}

// Call is a tool call of the demo model. ArgsJSON is the arguments as text
// (verbatim for "/call"); Args is the same decoded, nil when ArgsJSON is not
// a JSON object (only with Input.RawArgs).
type Call struct {
	Name     string
	Args     map[string]any
	ArgsJSON string
}

const (
	greeting = "Hello! I'm the offline demo model, so I can't chat freely, but I can look things up " +
		"in the knowledge base. Ask me a question about it and I'll search for the answer."
	help = "I'm the offline demo model: I don't really understand language, but I can search the " +
		"knowledge base for you. Ask a question and I'll run kb_search, open the best match with kb_get, " +
		"and tell you what it says. To call any tool yourself, type /call NAME {\"arg\": \"value\"}."
	nothing = "I couldn't find anything about that in the knowledge base. Try other words, or ask about another topic."
)

// Decide answers according to the end of the conversation.
func Decide(in Input) Action {
	if len(in.Results) > 0 {
		if IsCall(in.LastUser) || IsConfirmation(in.LastUser) {
			return reportResults(in.Results)
		}
		return afterTools(in.Results)
	}
	text := strings.TrimSpace(in.Text)
	if cs, ok := parseCalls(text); ok {
		return manualCalls(cs, in)
	}
	if outcome, tool, ok := confirmation(text); ok {
		return answerConfirmation(outcome, tool, in)
	}
	switch {
	case text == "":
		return say("I didn't catch a question. Ask me something about the knowledge base.")
	case isGreeting(text):
		return say(greeting)
	case isHelp(text):
		return say(help)
	case len(in.Tools) > 0 && !slices.Contains(in.Tools, "kb_search"):
		// With no tools declared at all (a bare SDK call) the demo still
		// looks the question up.
		return say("I can only answer from the knowledge base, and no kb_search tool is available here.")
	}
	return call("kb_search", map[string]any{"query": text, "limit": 3})
}

func say(text string) Action { return Action{Text: text} }

func call(name string, args map[string]any) Action {
	b, _ := json.Marshal(args) // maps of strings and numbers always encode
	return Action{Calls: []Call{{Name: name, Args: args, ArgsJSON: string(b)}}}
}

// afterTools answers the tool results of a knowledge-base lookup: a failure
// first, then a fetched document, then search results.
func afterTools(rs []Result) Action {
	for _, r := range rs {
		if msg, retry, failed := failure(r.Response); failed {
			text := fmt.Sprintf("Sorry, the %s tool failed: %s", r.Name, msg)
			if retry {
				text += " You can try again in a moment."
			}
			return say(text)
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
			return say(fmt.Sprintf("From “%s”: %s", title, ex))
		}
	}
	for _, r := range rs {
		if r.Name == "kb_search" {
			out, _ := r.Response["output"].(map[string]any)
			results, _ := out["results"].([]any)
			if len(results) == 0 {
				return say(nothing)
			}
			first, _ := results[0].(map[string]any)
			id, _ := first["id"].(string)
			if id == "" {
				return say("The knowledge base answered with a result I can't open (it has no id).")
			}
			return call("kb_get", map[string]any{"id": id})
		}
	}
	return say(fmt.Sprintf("I got an answer from %s, but the demo model only knows kb_search and kb_get.", rs[0].Name))
}

// Failure reads {"error": ...} from a tool response: the message of an
// error object, or an error given as a plain string; failed is false when
// the response holds no error.
func Failure(response map[string]any) (msg string, failed bool) {
	msg, _, failed = failure(response)
	return msg, failed
}

// failure is Failure, also saying whether the error is marked retryable.
func failure(response map[string]any) (msg string, retryable, failed bool) {
	switch e := response["error"].(type) {
	case nil:
		return "", false, false
	case string:
		if e != "" {
			return e, false, true
		}
	case map[string]any:
		retryable, _ = e["retryable"].(bool)
		if msg, _ := e["message"].(string); msg != "" {
			return msg, retryable, true
		}
	}
	return "no reason given", retryable, true
}
