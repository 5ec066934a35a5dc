package mcp

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/turnstile-gw/turnstile/tools"
)

// serverErrorTypes are the error types an MCP server may give an isError
// result (structuredContent.error.type): the ones a backend can mean. The
// others are the gateway's own refusals (a budget, a loop, a mode) and
// would mislead the model coming from a server.
var serverErrorTypes = map[tools.ErrorType]bool{
	tools.ErrPermanent: true, tools.ErrValidation: true, tools.ErrConflict: true,
	tools.ErrAuth: true, tools.ErrRateLimit: true, tools.ErrTransient: true,
}

// maxServerCode bounds the code a server may give an error.
const maxServerCode = 64

// serverError is the optional structuredContent.error of an isError
// result.
type serverError struct {
	Type               tools.ErrorType `json:"type"`
	Code               string          `json:"code"`
	Message            string          `json:"message"`
	Retryable          *bool           `json:"retryable"`
	PartialSideEffects *bool           `json:"partialSideEffects"`
}

// toolError turns a tools/call result with isError into a domain error, as
// a Go tool would return one: a business refusal ("title too vague") is not
// a fault of the gateway. Its message is the result's text (else
// structuredContent.error.message); its type PERMANENT unless
// structuredContent.error.type names one of serverErrorTypes; retryable as
// the server says, else for TRANSIENT and RATE_LIMIT only; and no partial
// side effects unless the server says so: the server answered, so it knows.
func toolError(server string, res *sdk.CallToolResult) tools.Envelope {
	var detail struct {
		Error serverError `json:"error"`
	}
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			_ = json.Unmarshal(b, &detail) // a shape we do not know leaves the defaults
		}
	}
	se := detail.Error
	msg := strings.TrimSpace(contentText(res.Content))
	if msg == "" {
		msg = strings.TrimSpace(se.Message)
	}
	if msg == "" {
		msg = fmt.Sprintf("the MCP server %s reported an error without a message", server)
	}
	typ := tools.ErrPermanent
	if serverErrorTypes[se.Type] {
		typ = se.Type
	}
	retryable := typ == tools.ErrTransient || typ == tools.ErrRateLimit
	if se.Retryable != nil {
		retryable = *se.Retryable
	}
	partial := se.PartialSideEffects != nil && *se.PartialSideEffects
	env := tools.Fail(typ, tools.Clip(msg, maxServerMessage), retryable, partial)
	env.Error.Code = tools.Clip(strings.TrimSpace(se.Code), maxServerCode)
	return env
}
