package builtin

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/tools"
)

// ignoreUser answers ignore_user with a BLOCK_USER intent; the session
// applies the block (the tool never touches sessions).
type ignoreUser struct{}

func (ignoreUser) Handle(ctx context.Context, call tools.Call) tools.Envelope {
	if env, done := cancelled(ctx); done {
		return env
	}
	var args struct {
		Seconds int    `json:"duration_seconds"`
		Reason  string `json:"reason"`
	}
	if err := json.Unmarshal(call.Args, &args); err != nil || args.Seconds <= 0 {
		return tools.Fail(tools.ErrValidation, "duration_seconds must be a positive integer", false, false)
	}
	return tools.OK(map[string]any{"blockedForSeconds": args.Seconds},
		intents.Intent{Type: intents.BlockUser, Duration: time.Duration(args.Seconds) * time.Second, Reason: args.Reason})
}

// startVoice answers start_voice_session with a START_VOICE_SESSION intent.
type startVoice struct{}

func (startVoice) Handle(ctx context.Context, _ tools.Call) tools.Envelope {
	if env, done := cancelled(ctx); done {
		return env
	}
	return tools.OK(map[string]any{"mode": "voice"}, intents.Intent{Type: intents.StartVoiceSession})
}

// endVoice answers end_voice_session with an END_VOICE_SESSION intent.
type endVoice struct{}

func (endVoice) Handle(ctx context.Context, call tools.Call) tools.Envelope {
	if env, done := cancelled(ctx); done {
		return env
	}
	var args struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(call.Args, &args)
	return tools.OK(map[string]any{"mode": "text"}, intents.Intent{Type: intents.EndVoiceSession, Reason: args.Reason})
}

// finish ends the run (tools.Terminate): its note, or "Finished", is the
// turn's final answer.
type finish struct{}

func (finish) Handle(ctx context.Context, call tools.Call) tools.Envelope {
	if env, done := cancelled(ctx); done {
		return env
	}
	var args struct {
		Note string `json:"note"`
	}
	_ = json.Unmarshal(call.Args, &args)
	return tools.Terminate(args.Note)
}

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
	err := json.Unmarshal(call.Args, &args)
	reason := strings.TrimSpace(args.Reason)
	if err != nil || reason == "" {
		return tools.Fail(tools.ErrValidation, "reason must be a non-empty string", false, false)
	}
	return tools.OK(map[string]any{"handedOff": true,
		"next": "A person takes over; tell the user so in one short sentence and say nothing more."},
		intents.Intent{Type: intents.HandOff, Reason: reason, Message: strings.TrimSpace(args.Summary)})
}
