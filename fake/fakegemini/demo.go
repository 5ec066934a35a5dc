package fakegemini

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/fake/fakedemo"
)

// DemoBrain is the offline default's model: the shared demo rules of
// package fakedemo (greetings and help answered, every other question
// looked up with kb_search, the best hit opened with kb_get and quoted,
// "/call NAME {json args}" to call any declared tool and report its
// result) over the Gemini wire. It reads function responses as plain maps:
// {"output": ...} on success, {"error": {"type","message","retryable"}} on
// failure.
type DemoBrain struct {
	// Pace is waited before every streamed text chunk but the first, so that
	// answers visibly stream. Zero sends them at once.
	Pace time.Duration
}

// NewDemo returns a DemoBrain that streams without pauses.
func NewDemo() *DemoBrain { return &DemoBrain{} }

// Respond answers according to the last content of the conversation.
func (d *DemoBrain) Respond(_ context.Context, req *Request) Reply {
	a := fakedemo.Decide(demoInput(req))
	if len(a.Calls) > 0 && req.FunctionCallingMode() == genai.FunctionCallingConfigModeNone {
		a = fakedemo.Action{Text: "I would look that up, but tools are switched off for this request " +
			"(function calling mode NONE)."}
	}
	if len(a.Calls) == 0 {
		return d.say(a.Text)
	}
	calls := make([]Call, len(a.Calls))
	for i, c := range a.Calls {
		calls[i] = Call{Name: c.Name, Args: c.Args}
	}
	return CallReply(calls...)
}

// demoInput reads the conversation the way the demo rules want it: the
// function responses of the last content, or else its user text; the
// newest typed user text; the declared function names; the model's
// earlier calls.
func demoInput(req *Request) fakedemo.Input {
	in := fakedemo.Input{Tools: declaredNames(req.Tools), LastUser: lastUserText(req.Contents)}
	var last *genai.Content
	if n := len(req.Contents); n > 0 {
		last = req.Contents[n-1]
	}
	for _, r := range functionResponses(last) {
		in.Results = append(in.Results, fakedemo.Result{Name: r.Name, Response: r.Response})
	}
	if len(in.Results) == 0 {
		in.Text = userText(last)
	}
	for _, c := range req.Contents {
		if c == nil || c.Role != genai.RoleModel {
			continue
		}
		for _, p := range c.Parts {
			if p != nil && p.FunctionCall != nil {
				in.Earlier = append(in.Earlier, demoCall(p.FunctionCall.Name, p.FunctionCall.Args))
			}
		}
	}
	return in
}

// demoCall is an earlier call as the demo rules see it.
func demoCall(name string, args map[string]any) fakedemo.Call {
	if args == nil {
		args = map[string]any{}
	}
	b, _ := json.Marshal(args) // decoded from JSON, so it encodes
	return fakedemo.Call{Name: name, Args: args, ArgsJSON: string(b)}
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

// lastUserText is the text of the last user content that is not only
// function responses: what the user last typed.
func lastUserText(contents []*genai.Content) string {
	for i := len(contents) - 1; i >= 0; i-- {
		if t := userText(contents[i]); t != "" {
			return t
		}
	}
	return ""
}

// declaredNames lists the function names of tools, in order.
func declaredNames(tools []*genai.Tool) []string {
	var out []string
	for _, t := range tools {
		if t == nil {
			continue
		}
		for _, d := range t.FunctionDeclarations {
			if d != nil {
				out = append(out, d.Name)
			}
		}
	}
	return out
}
