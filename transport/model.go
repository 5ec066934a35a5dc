// Package transport holds the provider-neutral model types the session
// speaks: streaming text models (TextModel) and realtime voice sessions
// (LiveModel). The adapters (Gemini text streaming, Gemini Live,
// OpenAI-compatible Chat Completions) and the fake servers that speak the
// real wire protocols on loopback live in its sub-packages.
package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"
)

// Provider is who serves a text model, as settings and metric labels name
// it. A closed set: Providers.
type Provider string

// The providers of text models.
const (
	ProviderGemini Provider = "gemini"
	ProviderOpenAI Provider = "openai"
)

// Providers lists the providers.
var Providers = []Provider{ProviderGemini, ProviderOpenAI}

// Role says who produced an entry of the conversation.
type Role string

const (
	RoleUser  Role = "user"
	RoleModel Role = "model"
	// RoleTool carries function results back to the model.
	RoleTool Role = "tool"
	// RoleSystem is an instruction from the gateway at this point of a
	// turn (the restricted-output reminder). It is sent, never committed.
	// A provider with a system role mid-conversation (OpenAI) gets it as a
	// system message in place; Gemini has none, so its adapter moves it to
	// the system instruction's turn note (see TurnNote).
	RoleSystem Role = "system"
)

// TurnNoteHeading introduces the part of a system instruction that holds
// notes for the current turn only (a pending message, a confirmation
// outcome, a reminder); what precedes it, the base prompt, never changes.
const TurnNoteHeading = "\n\n# Note for this turn\n"

// TurnNote adds note to system's turn note, starting the note section if
// system has none yet.
func TurnNote(system, note string) string {
	if note == "" {
		return system
	}
	if strings.Contains(system, TurnNoteHeading) {
		return system + "\n" + note
	}
	return system + TurnNoteHeading + note
}

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
// turn; when the provider sends none, the orchestrator gives it a random
// UUID (NewCallID) and marks it Synthetic (an adapter whose provider requires IDs may instead assign one
// itself, unmarked, and send it back like a provider's own).
type FunctionCall struct {
	ID   string         `json:"id"`
	Name string         `json:"name"`
	Args map[string]any `json:"args,omitempty"`
	// ArgsError is set when the provider's arguments could not be read as a
	// JSON object (OpenAI-compatible models stream them as text, which may
	// be broken): Args is nil and the call must not run; it is answered with
	// a VALIDATION invalid_json error instead. It names the fault without
	// quoting the arguments, so it is safe to log. Empty for a valid call.
	ArgsError string `json:"argsError,omitempty"`
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

// ToolDecl declares one tool to the model, with its arguments' schema in
// the two renderings the adapters send: text adapters send Parameters,
// Gemini Live sends ParametersOpenAPI (the spec's voice architecture: Live
// gets Gemini-native schemas).
type ToolDecl struct {
	Name        string
	Description string
	// Parameters is the arguments' JSON Schema (draft 2020-12) object.
	Parameters map[string]any
	// ParametersOpenAPI is the same schema as the JSON of an OpenAPI 3.0
	// Schema object, in the subset and spelling Gemini's native
	// "parameters" take (UPPERCASE type names; the registry renders it with
	// tools.GeminiSchema). Nil when the schema cannot be expressed in that
	// subset: Live then declares the tool with Parameters. It is left out
	// of the declaration's JSON, which sizes the session-init estimate.
	ParametersOpenAPI json.RawMessage `json:"-"`
}

// TextRequest is one call to a streaming text model.
type TextRequest struct {
	System  string
	History []Entry
	Tools   []ToolDecl
	// Admit, when set, is asked once, after the request is built and
	// before its contents are sent, whether they may go out: the
	// session's store round trip (the user's block, turn limits, fencing)
	// runs alongside the build and, where the adapter holds the body
	// (httphold.Hold), alongside the request's connection and headers. false: the
	// contents are not sent, and the stream yields ErrNotAdmitted alone.
	// It may be called from another goroutine (the HTTP transport's).
	// Adapters call it; a TextModel that does not is still correct (the
	// session then learns the verdict with the first chunk and cancels the
	// request), only the request went out.
	Admit func() bool
}

// ErrNotAdmitted is the one error of a stream whose request Admit
// refused: nothing reached the model.
var ErrNotAdmitted = errors.New("model request not admitted")

// Chunk is one streamed piece of a model answer.
//
// Text is a delta of the answer's text.
//
// Started announces calls as soon as their name is known, before their
// arguments are complete: ID and Name are set, Args is nil. Adapters whose
// provider streams calls piecemeal (OpenAI-compatible) announce every call
// there first; adapters that receive whole calls (Gemini) never set it.
//
// Calls are complete function calls, each with its final Args (or
// ArgsError). A call in Calls keeps the ID it was announced with; a call in
// Calls that was never announced in Started is started and complete at
// once. One chunk may carry a call in both: Started is handled first. If the stream ends in an error, calls announced in Started but not
// yet delivered in Calls are abandoned: they never run and need no answer.
//
// FinishReason is set on the last chunk of a stream that ended properly, in
// the provider's words (e.g. "STOP", "stop", "tool_calls").
//
// Usage, when the provider reports it, is set on the last chunk only and
// counts the whole request.
type Chunk struct {
	Text         string
	Started      []FunctionCall
	Calls        []FunctionCall
	FinishReason string
	Usage        *Usage
}

// Usage is the token count of one model request as the provider reports
// it. OutputTokens include reasoning ("thinking") tokens, which are billed
// as output.
type Usage struct {
	InputTokens  int
	OutputTokens int
}

// TextModel streams one model answer. The sequence ends after the chunk that
// carries a FinishReason, or with exactly one error.
type TextModel interface {
	Stream(ctx context.Context, req TextRequest) iter.Seq2[Chunk, error]
}

// ErrTruncated means the answer is incomplete and must not be taken as
// final: the stream ended without a finish reason, or the model stopped at
// its output token limit (the error then wraps ErrTruncated and says so).
// Trying again may help; the session reports it as model_truncated.
var ErrTruncated = errors.New("model stream ended without a finish reason")

// ErrRefused means the provider stopped the answer on purpose (a content
// filter or a safety block): what was streamed must be dropped. Asking the
// same again will be refused again, so it is not retryable; the session
// reports it as model_refused. Adapters wrap it with the provider's reason.
var ErrRefused = errors.New("the model refused to answer")

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
