package orchestrator

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/turnstile-gw/turnstile/tools"
)

// execute runs the handler with the tool's hard timeout. A handler that
// overruns is answered TIMEOUT at once; its context is cancelled and its
// late result dropped. A cancelled ctx (toolCallCancellation, barge-in, the
// turn ending) is answered TRANSIENT, which the ledger then withholds.
func (o *Orchestrator) execute(ctx context.Context, t *tools.Tool, call tools.Call) (tools.Envelope, bool) {
	if ctx.Err() != nil {
		return tools.Fail(tools.ErrTransient, "the call was cancelled before it started", true, false), false
	}
	ctx, cancel := context.WithTimeout(ctx, t.Timeout())
	defer cancel()
	done := make(chan tools.Envelope, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				o.Log.ErrorContext(ctx, "tool handler panicked", "tool", t.Name, "call", call.ID, "panic", fmt.Sprint(r),
					"stack", string(debug.Stack()))
				done <- tools.Fail(tools.ErrInternal, "the tool failed unexpectedly", false, true)
			}
		}()
		done <- t.Handler.Handle(ctx, call)
	}()
	select {
	case env := <-done:
		return sanitize(checkEnvelope(env)), false
	case <-ctx.Done():
		if ctx.Err() == context.DeadlineExceeded {
			return tools.Fail(tools.ErrTimeout, fmt.Sprintf("%s did not answer within %s", t.Name, t.Timeout()), true, true), true
		}
		return tools.Fail(tools.ErrTransient, "the call was cancelled", true, true), false
	}
}

// checkEnvelope turns a malformed envelope into an INTERNAL error rather
// than passing nonsense to the model: ok with an error, neither, or a
// termination that failed or carries data besides its note.
func checkEnvelope(env tools.Envelope) tools.Envelope {
	switch {
	case env.OK && env.Error != nil, !env.OK && env.Error == nil,
		env.Terminate != nil && (!env.OK || env.Data != nil):
		return tools.Fail(tools.ErrInternal, "the tool returned a malformed result", false, true)
	case !env.OK && !tools.KnownErrorType(env.Error.Type):
		// An error type outside the closed set means nothing to the model
		// or the metrics: it is an internal error, message kept.
		e := *env.Error
		e.Type = tools.ErrInternal
		env.Error = &e
	}
	for _, in := range env.Intents {
		if err := in.Validate(); err != nil {
			return tools.Fail(tools.ErrInternal, "the tool returned an invalid intent", false, true)
		}
	}
	return env
}
