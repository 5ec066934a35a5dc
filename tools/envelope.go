package tools

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/protocol"
)

// ErrorType is the closed set of error types a tool call can end with.
type ErrorType string

const (
	// Registry errors.
	ErrValidation ErrorType = "VALIDATION"
	ErrNotFound   ErrorType = "NOT_FOUND"
	ErrInternal   ErrorType = "INTERNAL"
	// Orchestrator errors.
	ErrModeRestricted       ErrorType = "MODE_RESTRICTED"
	ErrBudgetExceeded       ErrorType = "BUDGET_EXCEEDED"
	ErrConfirmationRequired ErrorType = "CONFIRMATION_REQUIRED"
	ErrLoopDetected         ErrorType = "LOOP_DETECTED"
	ErrTimeout              ErrorType = "TIMEOUT"
	// ErrUntrustedContext refuses a sensitive tool called after untrusted
	// content (another tool's output) entered the turn, when the user
	// cannot be asked to approve it (ignore_user). Never retryable.
	ErrUntrustedContext ErrorType = "UNTRUSTED_CONTEXT"
	// Handler errors.
	ErrSessionInactive ErrorType = "SESSION_INACTIVE"
	ErrTransient       ErrorType = "TRANSIENT"
	ErrPermanent       ErrorType = "PERMANENT"
	ErrConflict        ErrorType = "CONFLICT"
	ErrAuth            ErrorType = "AUTH"
	ErrRateLimit       ErrorType = "RATE_LIMIT"
)

// ErrorTypes is the closed set of ErrorType; a tool call's outcome label
// (metrics) is "ok" or one of them in lower case.
var ErrorTypes = []ErrorType{ErrValidation, ErrNotFound, ErrInternal, ErrModeRestricted, ErrBudgetExceeded,
	ErrConfirmationRequired, ErrLoopDetected, ErrTimeout, ErrUntrustedContext, ErrSessionInactive, ErrTransient,
	ErrPermanent, ErrConflict, ErrAuth, ErrRateLimit}

// Error is the error half of the envelope.
type Error struct {
	Type ErrorType `json:"type"`
	// Code refines the type for a caller that branches on it, e.g.
	// "invalid_json" for a VALIDATION error whose arguments did not parse.
	Code      string `json:"code,omitempty"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
	// PartialSideEffects is false for errors raised before the handler ran
	// and true when nobody can say (panics, timeouts, unknown failures).
	PartialSideEffects bool `json:"partialSideEffects"`
}

// Meta carries facts about the call that are not part of its answer.
type Meta struct {
	DurationMs int64 `json:"durationMs,omitempty"`
	Truncated  bool  `json:"truncated,omitempty"`
}

// Envelope is what every tool call ends with:
// {ok:true,data,intents,meta}, {ok:true,terminate,intents,meta} or
// {ok:false,error,meta}.
type Envelope struct {
	OK      bool             `json:"ok"`
	Data    any              `json:"data,omitempty"`
	Intents []intents.Intent `json:"intents,omitempty"`
	Error   *Error           `json:"error,omitempty"`
	// Terminate, on a successful envelope without Data, ends the turn at
	// run time (see Terminate).
	Terminate *Termination `json:"terminate,omitempty"`
	Meta      Meta         `json:"meta"`
}

// Termination is a handler's decision to end the turn now.
type Termination struct {
	// Note is the turn's final answer, and what the model is answered;
	// empty means FinishedNote.
	Note string `json:"note,omitempty"`
}

// FinishedNote is the answer of a termination without a note.
const FinishedNote = "Finished"

// Text is the termination's answer: its note, or FinishedNote.
func (t Termination) Text() string {
	if t.Note == "" {
		return FinishedNote
	}
	return t.Note
}

// OK builds a successful envelope.
func OK(data any, in ...intents.Intent) Envelope {
	return Envelope{OK: true, Data: data, Intents: in}
}

// Terminate builds a successful envelope that ends the turn: the model is
// answered with the note (or "Finished" when it is empty), the note is the
// turn's final answer (text.done), the turn ends with turn.done "finish",
// and a text model is not called again. Any tool may end the turn this way
// when its handler decides to; the built-in finish tool does nothing else.
// A mode change requested in the same turn still wins (docs/tools.md).
func Terminate(note string, in ...intents.Intent) Envelope {
	return Envelope{OK: true, Intents: in, Terminate: &Termination{Note: note}}
}

// Fail builds a failed envelope. partial says whether side effects may have
// happened.
func Fail(t ErrorType, msg string, retryable, partial bool) Envelope {
	return Envelope{Error: &Error{Type: t, Message: msg, Retryable: retryable, PartialSideEffects: partial}}
}

// Call is what a handler gets: the validated arguments and who is calling.
type Call struct {
	ID        string
	SessionID string
	UserID    string
	Mode      protocol.Mode
	Args      json.RawMessage
	// IdempotencyKey names the action: the same for the model's retries of
	// it within a turn and for its approved run (orchestrator/idempotency.go).
	IdempotencyKey string
	// Claims are the token claims the gateway forwards to tools
	// (TURNSTILE_TOOL_CLAIMS), each a checked value (ClaimValue). The map
	// is shared by the session's calls: read it, never write it.
	Claims Claims
}

// Identity is what the call's service is told about it (Identity.Header,
// Identity.Meta).
func (c Call) Identity() Identity {
	return Identity{User: c.UserID, Session: c.SessionID, Call: c.ID, IdempotencyKey: c.IdempotencyKey, Claims: c.Claims}
}

// Handler runs one tool. It must honour ctx (the hard timeout and
// cancellations arrive through it) and must not touch sessions: it returns
// data and intents only.
type Handler interface {
	Handle(ctx context.Context, call Call) Envelope
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, call Call) Envelope

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, call Call) Envelope { return f(ctx, call) }

// KnownErrorType reports whether t is one of the closed set of error types.
func KnownErrorType(t ErrorType) bool { return slices.Contains(ErrorTypes, t) }
