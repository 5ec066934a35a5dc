package builtin

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/tools"
)

// requestHuman answers request_human with a HAND_OFF intent: the session
// stops sending the user's messages to the model, tells the browser, the
// event stream and the help desk (docs/tools.md, "request_human").
type requestHuman struct{}

func (requestHuman) Handle(ctx context.Context, call tools.Call) tools.Envelope {
	if env, done := cancelled(ctx); done {
		return env
	}
	var args struct {
		Reason  string `json:"reason"`
		Summary string `json:"summary"`
	}
	if err := json.Unmarshal(call.Args, &args); err != nil || strings.TrimSpace(args.Reason) == "" {
		return tools.Fail(tools.ErrValidation, "reason must be a non-empty string", false, false)
	}
	return tools.OK(map[string]any{"handedOff": true,
		"next": "A person takes over; tell the user so in one short sentence and say nothing more."},
		intents.Intent{Type: intents.HandOff, Reason: strings.TrimSpace(args.Reason), Message: strings.TrimSpace(args.Summary)})
}
