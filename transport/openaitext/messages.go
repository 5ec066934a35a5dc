package openaitext

import (
	"encoding/json"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"

	"github.com/turnstile-gw/turnstile/transport"
)

// unanswered is the tool message of a call that has no result in the
// history (none is expected, but the API refuses an assistant message whose
// calls are not each followed by a tool message).
const unanswered = `{"error":{"type":"INTERNAL","message":"This call got no result.","retryable":false}}`

// Messages converts the system instruction and the neutral history to chat
// messages: a model entry's calls become the assistant message's tool_calls
// (arguments as JSON text, IDs as they are, synthetic ones included: the
// API needs them to pair results), and each call is followed by exactly one
// tool message with its result, as the API demands. A result without a
// call is dropped; a call without a result gets an error result. Entries
// whose call IDs are empty are paired by order and given positional IDs.
func Messages(system string, history []transport.Entry) []openai.ChatCompletionMessageParamUnion {
	var out []openai.ChatCompletionMessageParamUnion
	if system != "" {
		out = append(out, openai.SystemMessage(system))
	}
	for i := 0; i < len(history); i++ {
		e := history[i]
		switch e.Role {
		case transport.RoleUser:
			out = append(out, openai.UserMessage(e.Text))
		case transport.RoleSystem:
			// Chat Completions takes a system message anywhere: the
			// gateway's reminder stays where the loop put it.
			out = append(out, openai.SystemMessage(e.Text))
		case transport.RoleModel:
			if len(e.Calls) == 0 {
				if e.Text != "" {
					out = append(out, openai.AssistantMessage(e.Text))
				}
				continue
			}
			j := i + 1
			var results []transport.FunctionResult
			for ; j < len(history) && history[j].Role == transport.RoleTool; j++ {
				results = append(results, history[j].Results...)
			}
			out = append(out, callRound(i, e, results)...)
			i = j - 1
		case transport.RoleTool:
			// Results that follow no call: nothing to pair them with.
		}
	}
	return out
}

// callRound is one assistant message with calls and the tool messages that
// answer them, in the calls' order.
func callRound(entry int, e transport.Entry, results []transport.FunctionResult) []openai.ChatCompletionMessageParamUnion {
	byID := map[string]transport.FunctionResult{}
	var anonymous []transport.FunctionResult // results without an ID, paired by order
	for _, r := range results {
		if r.ID == "" {
			anonymous = append(anonymous, r)
		} else if _, dup := byID[r.ID]; !dup {
			byID[r.ID] = r
		}
	}
	asst := openai.ChatCompletionAssistantMessageParam{}
	if e.Text != "" {
		asst.Content.OfString = param.NewOpt(e.Text)
	}
	answers := make([]openai.ChatCompletionMessageParamUnion, 0, len(e.Calls))
	for k, c := range e.Calls {
		id := c.ID
		r, ok := byID[id]
		if id == "" {
			id = fmt.Sprintf("call_%d_%d", entry, k)
			if ok = len(anonymous) > 0; ok {
				r, anonymous = anonymous[0], anonymous[1:]
			}
		}
		asst.ToolCalls = append(asst.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID:       id,
				Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: argsText(c)},
			},
		})
		content := unanswered
		if ok {
			content = responseText(r.Response)
		}
		answers = append(answers, openai.ToolMessage(content, id))
	}
	return append([]openai.ChatCompletionMessageParamUnion{{OfAssistant: &asst}}, answers...)
}

// argsText is a call's arguments as the model is shown them again: its
// JSON, or {} for a call whose arguments were unreadable (their text is
// not kept).
func argsText(c transport.FunctionCall) string {
	if c.Args == nil {
		return "{}"
	}
	b, err := json.Marshal(c.Args)
	if err != nil {
		return "{}"
	}
	return string(b)
}

func responseText(resp map[string]any) string {
	if resp == nil {
		return `{"output":null}`
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return `{"error":{"type":"INTERNAL","message":"The result could not be encoded.","retryable":false}}`
	}
	return string(b)
}
