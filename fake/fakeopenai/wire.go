package fakeopenai

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// Content is a message's text. On the wire it is a string, null, or an
// array of parts; the text parts are joined.
type Content string

// UnmarshalJSON accepts a string, null or an array of {"type","text"} parts.
func (c *Content) UnmarshalJSON(b []byte) error {
	var s *string
	if err := json.Unmarshal(b, &s); err == nil {
		if s != nil {
			*c = Content(*s)
		}
		return nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return errors.New("content must be a string, null or an array of content parts")
	}
	var sb strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			sb.WriteString(p.Text)
		}
	}
	*c = Content(sb.String())
	return nil
}

// MarshalJSON writes the text as a string.
func (c Content) MarshalJSON() ([]byte, error) { return json.Marshal(string(c)) }

// wireRequest is the body of POST /v1/chat/completions.
type wireRequest struct {
	Model         string          `json:"model"`
	Messages      []Message       `json:"messages"`
	Tools         []Tool          `json:"tools"`
	ToolChoice    json.RawMessage `json:"tool_choice"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// badRequest is a 400 the way the real API words it.
type badRequest struct {
	param, code, msg string
}

func (e *badRequest) Error() string { return e.msg }

var functionName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// validate applies the checks of the real API that a client adapter can
// get wrong.
func (r *wireRequest) validate() *badRequest {
	if r.Model == "" {
		return &badRequest{msg: "you must provide a model parameter"}
	}
	if len(r.Messages) == 0 {
		return &badRequest{param: "messages", msg: "[] is too short - 'messages'"}
	}
	for i, t := range r.Tools {
		if t.Type != "function" {
			return &badRequest{param: fmt.Sprintf("tools[%d].type", i), code: "invalid_value",
				msg: fmt.Sprintf("Invalid value: '%s'. Supported values are: 'function' and 'custom'.", t.Type)}
		}
		if !functionName.MatchString(t.Function.Name) {
			return &badRequest{param: fmt.Sprintf("tools[%d].function.name", i), code: "invalid_value",
				msg: fmt.Sprintf("Invalid 'tools[%d].function.name': string does not match pattern. "+
					"Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", i)}
		}
	}
	if len(r.ToolChoice) > 0 && string(r.ToolChoice) != "null" {
		if len(r.Tools) == 0 {
			return &badRequest{param: "tool_choice",
				msg: "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified."}
		}
		var s string
		if json.Unmarshal(r.ToolChoice, &s) == nil && s != "auto" && s != "none" && s != "required" {
			return &badRequest{param: "tool_choice", code: "invalid_value",
				msg: fmt.Sprintf("Invalid value: '%s'. Supported values are: 'none', 'auto', and 'required'.", s)}
		}
	}
	if r.StreamOptions != nil && !r.Stream {
		return &badRequest{param: "stream_options",
			msg: "The 'stream_options' parameter is only allowed when 'stream' is enabled."}
	}
	return validateMessages(r.Messages)
}

// validateMessages checks roles and that tool messages answer exactly the
// calls of the assistant message before them.
func validateMessages(msgs []Message) *badRequest {
	var pending []string // tool_call ids still waiting for their tool message
	answerable := map[string]bool{}
	for i, m := range msgs {
		if m.Role != "tool" && len(pending) > 0 {
			return &badRequest{param: fmt.Sprintf("messages.[%d].role", i-1),
				msg: "An assistant message with 'tool_calls' must be followed by tool messages responding to each " +
					"'tool_call_id'. The following tool_call_ids did not have response messages: " + strings.Join(pending, ", ")}
		}
		switch m.Role {
		case "system", "developer", "user":
			answerable = map[string]bool{}
		case "assistant":
			answerable = map[string]bool{}
			for j, c := range m.ToolCalls {
				if c.ID == "" || c.Function.Name == "" {
					return &badRequest{param: fmt.Sprintf("messages.[%d].tool_calls.[%d]", i, j),
						msg: "Missing required parameter: 'id' or 'function.name' of a tool call."}
				}
				pending = append(pending, c.ID)
				answerable[c.ID] = true
			}
		case "tool":
			if !answerable[m.ToolCallID] {
				return &badRequest{param: fmt.Sprintf("messages.[%d].role", i),
					msg: "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."}
			}
			delete(answerable, m.ToolCallID)
			pending = remove(pending, m.ToolCallID)
		default:
			return &badRequest{param: fmt.Sprintf("messages.[%d].role", i), code: "invalid_value",
				msg: fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'tool', and 'developer'.", m.Role)}
		}
	}
	if len(pending) > 0 {
		return &badRequest{param: fmt.Sprintf("messages.[%d].role", len(msgs)-1),
			msg: "An assistant message with 'tool_calls' must be followed by tool messages responding to each " +
				"'tool_call_id'. The following tool_call_ids did not have response messages: " + strings.Join(pending, ", ")}
	}
	return nil
}

func remove(ids []string, id string) []string {
	for i, v := range ids {
		if v == id {
			return append(ids[:i:i], ids[i+1:]...)
		}
	}
	return ids
}

// MarshalJSON writes {"message","type","param","code"} with null for an
// empty param or code.
func (e APIError) MarshalJSON() ([]byte, error) {
	orNull := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	return json.Marshal(struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}{e.Message, e.Type, orNull(e.Param), orNull(e.Code)})
}

// errorBody encodes {"error": e}, filling a missing message and type from
// the status.
func errorBody(status int, e *APIError) []byte {
	var body APIError
	if e != nil {
		body = *e
	}
	if body.Message == "" {
		body.Message = http.StatusText(status)
	}
	if body.Type == "" {
		body.Type = errorType(status)
	}
	data, err := json.Marshal(map[string]APIError{"error": body})
	if err != nil { // cannot happen: strings only
		return []byte(`{"error":{"message":"encode error","type":"server_error","param":null,"code":null}}`)
	}
	return data
}

// errorType is the real API's error type for a status.
func errorType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "requests"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

func writeError(w http.ResponseWriter, status int, e APIError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(errorBody(status, &e))
}

// chunkBuilder encodes one reply's chunks: same id, created time and model
// throughout, the assistant role on the first delta, usage counted as the
// real service does (prompt from the request size, completion from what
// was sent).
type chunkBuilder struct {
	id, model    string
	created      int64
	includeUsage bool
	first        bool
	promptTokens int
	outputChars  int
}

func newChunkBuilder(req *Request) *chunkBuilder {
	return &chunkBuilder{id: "chatcmpl-" + randomID(), model: req.Model, created: time.Now().Unix(),
		includeUsage: req.IncludeUsage, first: true, promptTokens: max(1, len(req.Body)/4)}
}

type wireChunk struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	SystemFingerprint string          `json:"system_fingerprint"`
	Choices           []wireChoice    `json:"choices"`
	Usage             json.RawMessage `json:"usage,omitempty"`
}

type wireChoice struct {
	Index        int            `json:"index"`
	Delta        map[string]any `json:"delta"`
	Logprobs     *struct{}      `json:"logprobs"`
	FinishReason *string        `json:"finish_reason"`
}

type wireUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

const fingerprint = "fp_fakeopenai"

// build encodes one chunk as compact JSON on a single line.
func (b *chunkBuilder) build(c Chunk) ([]byte, error) {
	delta := map[string]any{}
	if b.first {
		b.first = false
		delta["role"] = "assistant"
		delta["content"] = nil
		delta["refusal"] = nil
		if len(c.Calls) == 0 {
			delta["content"] = ""
		}
	}
	if c.Text != "" {
		delta["content"] = c.Text
		b.outputChars += len(c.Text)
	}
	if len(c.Calls) > 0 {
		calls := make([]map[string]any, 0, len(c.Calls))
		for _, d := range c.Calls {
			fn := map[string]any{"arguments": d.Args}
			call := map[string]any{"index": d.Index, "function": fn}
			if d.ID != "" {
				call["id"] = d.ID
				call["type"] = "function"
			}
			if d.Name != "" {
				fn["name"] = d.Name
			}
			calls = append(calls, call)
			b.outputChars += len(d.Name) + len(d.Args)
		}
		delta["tool_calls"] = calls
	}
	ch := wireChoice{Delta: delta}
	if c.FinishReason != "" {
		ch.FinishReason = &c.FinishReason
	}
	return b.encode([]wireChoice{ch}, nil)
}

// usage encodes the final usage chunk (no choices).
func (b *chunkBuilder) usage(u *Usage) ([]byte, error) {
	return b.encode([]wireChoice{}, b.counts(u))
}

func (b *chunkBuilder) counts(u *Usage) *wireUsage {
	if u == nil {
		u = &Usage{PromptTokens: b.promptTokens, CompletionTokens: (b.outputChars + 3) / 4}
	}
	return &wireUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
		TotalTokens: u.PromptTokens + u.CompletionTokens}
}

func (b *chunkBuilder) encode(choices []wireChoice, u *wireUsage) ([]byte, error) {
	c := wireChunk{ID: b.id, Object: "chat.completion.chunk", Created: b.created, Model: b.model,
		SystemFingerprint: fingerprint, Choices: choices}
	if b.includeUsage {
		c.Usage = json.RawMessage("null")
		if u != nil {
			raw, err := json.Marshal(u)
			if err != nil {
				return nil, fmt.Errorf("encode usage: %w", err)
			}
			c.Usage = raw
		}
	}
	data, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode chunk: %w", err)
	}
	return data, nil
}

func randomID() string {
	return strings.ToLower(rand.Text())
}
