package fakegemini

import (
	"context"
	"net/http"
	"strings"
	"time"

	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/fake/fakeserve"
)

// Brain decides what the fake model answers. Respond is called once per
// generateContent or streamGenerateContent request, possibly from several
// goroutines at once; ctx ends when the client goes away or the server closes.
type Brain interface {
	Respond(ctx context.Context, req *Request) Reply
}

// Request is one decoded model call as the client sent it.
type Request struct {
	// Model is the model id from the URL, without the "models/" prefix
	// (Gemini API) or the "projects/.../publishers/.../models/" one (Vertex
	// AI).
	Model string
	// API is the API the request came through; APIVersion its version from
	// the URL ("v1beta", "v1", "v1beta1", ...).
	API        API
	APIVersion string
	// Project and Location are the Vertex AI resource the URL named (empty
	// for the Gemini API).
	Project, Location string
	// Stream is true for streamGenerateContent, false for generateContent.
	Stream            bool
	Contents          []*genai.Content
	SystemInstruction *genai.Content
	Tools             []*genai.Tool
	ToolConfig        *genai.ToolConfig
	GenerationConfig  *genai.GenerationConfig
	// Header is a copy of the HTTP request headers (x-goog-api-key included).
	Header http.Header
	// RemoteAddr is the client's address: requests that came on one
	// connection share it.
	RemoteAddr string
}

// FunctionCallingMode is the request's toolConfig.functionCallingConfig.mode,
// AUTO when it sets none (the API's default with tools declared).
func (r *Request) FunctionCallingMode() genai.FunctionCallingConfigMode {
	if r.ToolConfig == nil || r.ToolConfig.FunctionCallingConfig == nil || r.ToolConfig.FunctionCallingConfig.Mode == "" {
		return genai.FunctionCallingConfigModeAuto
	}
	return r.ToolConfig.FunctionCallingConfig.Mode
}

// Reply is what the fake model does with one request. A Status of 400 or
// more answers before any chunk with Error as the body (or a generic error
// for that status when Error is nil). A BlockReason answers HTTP 200 with
// the one chunk the real API sends for a blocked prompt: promptFeedback
// with that blockReason and no candidates. Otherwise the Chunks are
// streamed in order; then MidStreamError, if set, is sent as a raw error
// line and the stream ends. A stream whose last chunk carries no
// FinishReason models a truncated answer. Hang keeps the stream open after
// the chunks until the client leaves or the server closes.
type Reply struct {
	Status         int
	Error          *APIError
	Chunks         []Chunk
	MidStreamError *APIError
	Hang           bool
	// BlockReason is a promptFeedback.blockReason: "SAFETY", "OTHER",
	// "BLOCKLIST", "PROHIBITED_CONTENT" or "IMAGE_SAFETY".
	BlockReason string
}

// Chunk is one streamed response. Delay is waited before it is sent.
type Chunk struct {
	Text         string
	Calls        []Call
	FinishReason string
	Delay        time.Duration
}

// Call is a function call the model makes. ID is sent only when non-empty:
// the real Gemini REST API usually sends no id. Signature, when set, is sent
// as the part's thoughtSignature, as thinking models do (see
// RequireThoughtSignatures); the Live API sends none.
type Call struct {
	ID        string
	Name      string
	Args      map[string]any
	Signature []byte
}

// APIError is the body of a Google API error:
// {"error":{"code":..,"message":..,"status":..,"details":[..]}}. Each of
// Details is a google.rpc error detail, an object whose "@type" names its
// type (see RetryInfo, ErrorInfo, QuotaFailure, Help).
type APIError struct {
	Code    int              `json:"code"`
	Message string           `json:"message"`
	Status  string           `json:"status"`
	Details []map[string]any `json:"details,omitempty"`
}

// TextReply answers text split into about pieces chunks (at word boundaries
// where possible), with finishReason STOP on the last one.
func TextReply(text string, pieces int) Reply {
	parts := fakeserve.SplitText(text, pieces)
	chunks := make([]Chunk, len(parts))
	for i, p := range parts {
		chunks[i] = Chunk{Text: p}
	}
	chunks[len(chunks)-1].FinishReason = "STOP"
	return Reply{Chunks: chunks}
}

// CallReply answers one chunk holding the given function calls, with
// finishReason STOP, as the real API does.
func CallReply(calls ...Call) Reply {
	return Reply{Chunks: []Chunk{{Calls: calls, FinishReason: "STOP"}}}
}

// ErrorReply answers an HTTP error before any chunk, e.g.
// ErrorReply(429, "RESOURCE_EXHAUSTED", "quota exceeded"), with optional
// google.rpc details such as ErrorInfo(...) or RetryInfo(...).
func ErrorReply(code int, status, msg string, details ...map[string]any) Reply {
	return Reply{Status: code, Error: &APIError{Code: code, Message: msg, Status: status, Details: details}}
}

// BlockedReply answers a prompt the model refuses, as the real API does:
// HTTP 200 and one chunk with promptFeedback.blockReason (e.g. "SAFETY" or
// "PROHIBITED_CONTENT") and no candidates.
func BlockedReply(reason string) Reply {
	return Reply{BlockReason: reason}
}

// statusName gives the canonical Google status for an HTTP code, used when a
// Reply sets Status without Error.
func statusName(code int) string {
	switch code {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusConflict:
		return "ABORTED"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case http.StatusNotImplemented:
		return "UNIMPLEMENTED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	}
	if code >= 500 {
		return "INTERNAL"
	}
	return strings.ToUpper(strings.ReplaceAll(http.StatusText(code), " ", "_"))
}
