package fakeopenai

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/turnstile-gw/turnstile/fake/fakeserve"
)

// Brain decides what the fake model answers. Respond is called once per
// valid chat completion request, possibly from several goroutines at once;
// ctx ends when the client goes away or the server closes.
type Brain interface {
	Respond(ctx context.Context, req *Request) Reply
}

// Request is one decoded chat completion request as the client sent it.
type Request struct {
	Model    string
	Stream   bool
	Messages []Message
	Tools    []Tool
	// ToolChoice is the raw tool_choice ("auto", "none", "required" or an
	// object), nil when absent.
	ToolChoice json.RawMessage
	// IncludeUsage is stream_options.include_usage.
	IncludeUsage bool
	// Header is a copy of the HTTP request headers (Authorization included).
	Header http.Header
	// Body is the request body as received.
	Body []byte
}

// ToolChoiceString is tool_choice when it is a plain string, "" otherwise.
func (r *Request) ToolChoiceString() string {
	var s string
	if json.Unmarshal(r.ToolChoice, &s) != nil {
		return ""
	}
	return s
}

// Message is one message of the conversation. Content holds the text,
// joined from its parts when the client sent an array.
type Message struct {
	Role       string     `json:"role"`
	Content    Content    `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
}

// ToolCall is a call of an assistant message in the history.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is the function of a ToolCall; Arguments is JSON text.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is one entry of the request's tools.
type Tool struct {
	Type     string      `json:"type"`
	Function FunctionDef `json:"function"`
}

// FunctionDef declares a function tool.
type FunctionDef struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters,omitempty"`
	Strict      *bool          `json:"strict,omitempty"`
}

// Reply is what the fake model does with one request.
//
// A Status of 400 or more answers before any chunk, with Error as the body
// (a generic error for the status when Error is nil), or RawError verbatim
// when set (other servers' error shapes). Header is sent with any reply
// (e.g. Retry-After).
//
// Otherwise the Chunks are streamed in order; then MidStreamError, if set,
// is sent as a "data: {"error": ...}" event and the stream ends. Then,
// unless Cut, come the usage chunk (when the client asked for it, with
// Usage or an estimate) and "data: [DONE]". A reply whose chunks carry no
// FinishReason models a model that stopped mid-answer; Cut models a
// connection dropped mid-stream. Hang keeps the stream open after the chunks
// until the client leaves or the server closes.
type Reply struct {
	Status   int
	Error    *APIError
	RawError []byte
	Header   http.Header

	Chunks         []Chunk
	MidStreamError *APIError
	Cut            bool
	Hang           bool
	Usage          *Usage
}

// Chunk is one streamed chat.completion.chunk. Text is a content delta;
// Calls are tool-call fragments; FinishReason ("stop", "tool_calls",
// "length", "content_filter") marks the last chunk of the answer. Delay is
// waited before the chunk is sent, and then Wait, when set, until it is
// closed (a test's way to hold the stream until it has seen what came
// before).
type Chunk struct {
	Text         string
	Calls        []CallDelta
	FinishReason string
	Delay        time.Duration
	Wait         <-chan struct{}
}

// CallDelta is one fragment of a streamed tool call: Index says which call
// it belongs to; ID and Name are sent only when non-empty (the real API
// sends them on a call's first fragment only); Args is a piece of the
// arguments text.
type CallDelta struct {
	Index int
	ID    string
	Name  string
	Args  string
}

// Usage overrides the token counts of the usage chunk.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
}

// APIError is the body of an OpenAI API error:
// {"error":{"message","type","param","code"}}; an empty Param or Code is
// sent as null, as the real API does.
type APIError struct {
	Message string
	Type    string
	Param   string
	Code    string
}

// Call is one whole tool call for CallReply. Args is the arguments text as
// the model writes it (not necessarily valid JSON). Pieces, when set, are
// the argument fragments to send (their concatenation is the arguments, and
// Args is ignored); otherwise Args is sent in three pieces cut at rune
// boundaries. ID is sent only when non-empty: some compatible servers send
// none.
type Call struct {
	ID     string
	Name   string
	Args   string
	Pieces []string
}

func (c Call) pieces() []string {
	if c.Pieces != nil {
		return c.Pieces
	}
	return Split(c.Args, 3)
}

// TextReply answers text split into about pieces content deltas (cut
// after a space where one is near), then a chunk with finish_reason "stop",
// as the real API does.
func TextReply(text string, pieces int) Reply {
	var r Reply
	if text != "" {
		for _, p := range fakeserve.SplitText(text, pieces) {
			r.Chunks = append(r.Chunks, Chunk{Text: p})
		}
	}
	r.Chunks = append(r.Chunks, Chunk{FinishReason: "stop"})
	return r
}

// CallReply streams the calls one after the other, as OpenAI does: each
// call's first fragment carries its index, id, name and empty arguments,
// the next ones pieces of the arguments; then finish_reason "tool_calls".
func CallReply(calls ...Call) Reply {
	var r Reply
	for i, c := range calls {
		r.Chunks = append(r.Chunks, Chunk{Calls: []CallDelta{{Index: i, ID: c.ID, Name: c.Name}}})
		for _, p := range c.pieces() {
			r.Chunks = append(r.Chunks, Chunk{Calls: []CallDelta{{Index: i, Args: p}}})
		}
	}
	r.Chunks = append(r.Chunks, Chunk{FinishReason: "tool_calls"})
	return r
}

// InterleavedCallReply streams the calls' fragments in turn (first
// fragments of every call, then the first argument pieces, ...), as the
// Chat Completions stream format allows; then finish_reason "tool_calls".
func InterleavedCallReply(calls ...Call) Reply {
	var r Reply
	for i, c := range calls {
		r.Chunks = append(r.Chunks, Chunk{Calls: []CallDelta{{Index: i, ID: c.ID, Name: c.Name}}})
	}
	for k := 0; ; k++ {
		sent := false
		for i, c := range calls {
			if ps := c.pieces(); k < len(ps) {
				r.Chunks = append(r.Chunks, Chunk{Calls: []CallDelta{{Index: i, Args: ps[k]}}})
				sent = true
			}
		}
		if !sent {
			break
		}
	}
	r.Chunks = append(r.Chunks, Chunk{FinishReason: "tool_calls"})
	return r
}

// ErrorReply answers an HTTP error before any chunk, e.g.
// ErrorReply(429, "requests", "rate_limit_exceeded", "Rate limit reached").
func ErrorReply(status int, typ, code, msg string) Reply {
	return Reply{Status: status, Error: &APIError{Type: typ, Code: code, Message: msg}}
}

// Split cuts s into at most n non-empty pieces of about equal length, at
// rune boundaries (the real API never splits a character, but it does cut
// JSON text anywhere else, inside a string or an escape). It returns one
// piece for n < 2 and none for "".
func Split(s string, n int) []string {
	if s == "" {
		return nil
	}
	runes := []rune(s)
	n = max(1, min(n, len(runes)))
	out := make([]string, 0, n)
	start := 0
	for i := 1; i <= n; i++ {
		end := len(runes) * i / n
		if end > start {
			out = append(out, string(runes[start:end]))
			start = end
		}
	}
	return out
}
