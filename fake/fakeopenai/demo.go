package fakeopenai

import (
	"context"
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/turnstile-gw/turnstile/fake/fakedemo"
)

// DemoBrain is the offline default's model over the OpenAI wire: the shared
// demo rules of package fakedemo (knowledge-base lookups, "/call NAME
// {json}"), with tool calls streamed in small argument fragments and
// OpenAI-style call IDs, and "/call" arguments that are not JSON sent as
// typed.
type DemoBrain struct {
	// Pace is waited before every streamed chunk but the first, so that
	// answers visibly stream. Zero sends them at once.
	Pace time.Duration
}

// NewDemo returns a DemoBrain that streams without pauses.
func NewDemo() *DemoBrain { return &DemoBrain{} }

// argPieceRunes is about how long an argument fragment of the demo is, as
// the real API streams a few characters per chunk.
const argPieceRunes = 6

// Respond answers according to the end of the conversation.
func (d *DemoBrain) Respond(_ context.Context, req *Request) Reply {
	a := fakedemo.Decide(demoInput(req))
	if len(a.Calls) > 0 && req.ToolChoiceString() == "none" {
		a = fakedemo.Action{Text: "I would look that up, but tools are switched off for this request (tool_choice none)."}
	}
	var r Reply
	if len(a.Calls) == 0 {
		r = TextReply(a.Text, 4)
	} else {
		calls := make([]Call, len(a.Calls))
		for i, c := range a.Calls {
			n := utf8.RuneCountInString(c.ArgsJSON)/argPieceRunes + 1
			calls[i] = Call{ID: "call_" + randomID()[:24], Name: c.Name, Pieces: Split(c.ArgsJSON, n)}
		}
		r = CallReply(calls...)
	}
	for i := 1; i < len(r.Chunks); i++ {
		r.Chunks[i].Delay = d.Pace
	}
	return r
}

// demoInput reads the conversation the way the demo rules want it: the last
// user text, or the tool results that end it (named after their calls); the
// model's earlier calls.
func demoInput(req *Request) fakedemo.Input {
	in := fakedemo.Input{RawArgs: true}
	for _, t := range req.Tools {
		in.Tools = append(in.Tools, t.Function.Name)
	}
	names := map[string]string{} // tool_call_id → function name
	for _, m := range req.Messages {
		switch m.Role {
		case "user":
			in.LastUser = string(m.Content)
		case "assistant":
			for _, c := range m.ToolCalls {
				names[c.ID] = c.Function.Name
				var args map[string]any
				_ = json.Unmarshal([]byte(c.Function.Arguments), &args) // nil when not an object
				in.Earlier = append(in.Earlier, fakedemo.Call{Name: c.Function.Name, Args: args, ArgsJSON: c.Function.Arguments})
			}
		}
	}
	msgs := req.Messages
	last := msgs[len(msgs)-1]
	switch last.Role {
	case "user":
		in.Text = string(last.Content)
	case "tool":
		start := len(msgs) - 1
		for start > 0 && msgs[start-1].Role == "tool" {
			start--
		}
		for _, m := range msgs[start:] {
			var resp map[string]any
			if json.Unmarshal([]byte(m.Content), &resp) != nil || resp == nil {
				resp = map[string]any{"output": string(m.Content)}
			}
			in.Results = append(in.Results, fakedemo.Result{Name: names[m.ToolCallID], Response: resp})
		}
	}
	return in
}
