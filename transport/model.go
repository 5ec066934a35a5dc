// Package transport holds the provider-neutral model types the session
// speaks: streaming text models (TextModel) and realtime voice sessions
// (LiveModel). The adapters for real providers and the fake servers that
// speak their wire protocols on loopback live in its sub-packages.
package transport

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"
)

// Role says who produced an entry of the conversation.
type Role string

const (
	RoleUser  Role = "user"
	RoleModel Role = "model"
	// RoleTool carries function results back to the model.
	RoleTool Role = "tool"
)

// Entry is one provider-neutral conversation entry. Exactly one of Text,
// Calls or Results is meaningful for a given Role: user entries carry Text,
// model entries carry Text and/or Calls, tool entries carry Results.
type Entry struct {
	Role Role   `json:"role"`
	Text string `json:"text,omitempty"`
	// Kind marks a user entry the gateway wrote for the user, e.g.
	// "confirmation" for the answer to a confirm.request.
	Kind string `json:"kind,omitempty"`
	// Turn is the session turn the entry belongs to (0 when unknown).
	Turn    int              `json:"turn,omitempty"`
	Calls   []FunctionCall   `json:"calls,omitempty"`
	Results []FunctionResult `json:"results,omitempty"`
}

// FunctionCall is a tool call requested by the model. ID is stable within a
// turn; when the provider sends none, the session invents one and marks it
// Synthetic.
type FunctionCall struct {
	ID   string         `json:"id"`
	Name string         `json:"name"`
	Args map[string]any `json:"args,omitempty"`
	// Synthetic marks an ID the gateway invented because the provider sent
	// none; adapters do not send such IDs back to the provider.
	Synthetic bool `json:"synthetic,omitempty"`
	// Signature is an opaque token the provider attached to the call and
	// requires back, unchanged and on the same call, whenever the call is
	// sent again as history (Gemini: the part's thoughtSignature, which
	// thinking models check). Adapters return it as they received it; nil
	// when the provider sent none.
	Signature []byte `json:"signature,omitempty"`
}

// FunctionResult answers one FunctionCall (same ID and Name). Response is
// what the model sees, conventionally {"output": ...} or {"error": ...}.
type FunctionResult struct {
	ID       string         `json:"id"`
	Name     string         `json:"name"`
	Response map[string]any `json:"response"`
}

// ToolDecl declares one tool to the model. Parameters is a JSON Schema
// (draft 2020-12) object for the tool's arguments.
type ToolDecl struct {
	Name        string
	Description string
	Parameters  map[string]any
}

// TextRequest is one call to a streaming text model.
type TextRequest struct {
	System  string
	History []Entry
	Tools   []ToolDecl
}

// Chunk is one streamed piece of a model answer. Text is a delta. Calls are
// complete function calls. FinishReason is set on the last chunk of a stream
// that ended properly (e.g. "STOP").
type Chunk struct {
	Text         string
	Calls        []FunctionCall
	FinishReason string
}

// TextModel streams one model answer. The sequence ends after the chunk that
// carries a FinishReason, or with exactly one error.
type TextModel interface {
	Stream(ctx context.Context, req TextRequest) iter.Seq2[Chunk, error]
}

// ErrTruncated means the stream ended without a finish reason: the answer is
// incomplete and must not be taken as final.
var ErrTruncated = errors.New("model stream ended without a finish reason")

// ModelError is an error answered by the model provider (an HTTP status or a
// structured error inside the stream).
//
// A prompt the provider refuses to answer is a ModelError too, although the
// provider's HTTP exchange succeeded (Gemini answers 200 with
// promptFeedback.blockReason and no candidates): Status 400 (the request
// was the problem), Code CodePromptBlocked, Reason the provider's reason
// (e.g. "SAFETY", "PROHIBITED_CONTENT"), not Retryable, and
// errors.Is(err, ErrPromptBlocked) holds. Retrying the same prompt gets the
// same answer; the user has to say something else.
type ModelError struct {
	Status    int    // HTTP-like status code, 0 when unknown
	Code      string // provider status, e.g. RESOURCE_EXHAUSTED, or CodePromptBlocked
	Message   string
	Retryable bool
	// RetryAfter is how long the provider asked the caller to wait before
	// retrying (Gemini: the retryDelay of a google.rpc.RetryInfo detail,
	// sent with 429); 0 when it did not say.
	RetryAfter time.Duration
	// Reason is the provider's machine-readable cause when it gives one:
	// the block reason of a refused prompt, or the reason of a
	// google.rpc.ErrorInfo detail (e.g. "API_KEY_INVALID").
	Reason string
}

// CodePromptBlocked is the ModelError code of a prompt the provider
// refused to answer.
const CodePromptBlocked = "PROMPT_BLOCKED"

// ErrPromptBlocked matches (with errors.Is) a *ModelError whose Code is
// CodePromptBlocked.
var ErrPromptBlocked = errors.New("the model provider refused the prompt")

func (e *ModelError) Error() string {
	msg := fmt.Sprintf("model error %d %s: %s", e.Status, e.Code, e.Message)
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	return msg
}

// Is reports whether target is ErrPromptBlocked and e is a blocked prompt.
func (e *ModelError) Is(target error) bool {
	return target == ErrPromptBlocked && e.Code == CodePromptBlocked
}

// RetryableStatus reports whether an HTTP status from a model provider is
// worth retrying later (rate limits, overload, server faults, timeouts).
func RetryableStatus(status int) bool {
	switch status {
	case 408, 429, 500, 502, 503, 504:
		return true
	}
	return false
}
