package session

import (
	"time"

	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
)

// turnEvents shows one turn's calls to the browser as they move through the
// orchestrator's pipeline.
type turnEvents struct {
	s    *session
	turn int
}

func (e turnEvents) CallReceived(call orchestrator.Call, redacted map[string]any) {
	e.s.timeline().CallReceived(e.turn, call.ID, call.Name, redacted)
	e.s.send(protocol.ToolCall{Turn: e.turn, ID: call.ID, Name: call.Name, Args: redacted})
}

func (e turnEvents) CallFinished(call orchestrator.Call, o orchestrator.Outcome) {
	ev := protocol.ToolResult{Turn: e.turn, ID: call.ID, Name: call.Name,
		OK: o.Envelope.OK, Refused: o.Refused, DurationMs: o.Duration.Milliseconds(), Result: o.Shown}
	errType := ""
	if err := o.Envelope.Error; err != nil {
		ev.Error = &protocol.ToolError{Type: string(err.Type), Code: err.Code, Message: err.Message}
		errType = string(err.Type)
	}
	e.s.timeline().CallFinished(e.turn, call.ID, call.Name, o.Envelope.OK, o.Refused, errType, o.Duration, o.Shown)
	e.s.send(ev)
}

func (e turnEvents) ConfirmRequested(conf orchestrator.Confirmation) {
	e.s.st.addConfirmation(conf) // so that a node can write it back if Redis loses it
	e.s.timeline().ConfirmAsked(e.turn, conf.Tool, conf.ExpiresAt)
	e.s.send(confirmRequest(conf))
}

func confirmRequest(conf orchestrator.Confirmation) protocol.ConfirmRequest {
	return protocol.ConfirmRequest{Turn: conf.Turn, Token: conf.Token,
		Tool: conf.Tool, Args: conf.Args, ExpiresAt: conf.ExpiresAt.UTC().Format(time.RFC3339)}
}
