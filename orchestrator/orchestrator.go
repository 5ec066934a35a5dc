// Package orchestrator runs every tool call the model makes through the
// gateway's pipeline: lookup, mode restriction, argument validation,
// execution with a hard timeout and panic recovery, envelope validation, and
// metrics. Every call gets exactly one answer for the model, refused or not.
package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/tools"
)

// unknownTool is the metric label of calls to tools that do not exist, so
// that a model inventing names cannot grow label cardinality.
const unknownTool = "unknown"

// Orchestrator executes tool calls against a registry.
type Orchestrator struct {
	reg *tools.Registry
	m   *metrics.Metrics
	log *slog.Logger
}

// New returns an orchestrator over reg.
func New(reg *tools.Registry, m *metrics.Metrics, log *slog.Logger) *Orchestrator {
	return &Orchestrator{reg: reg, m: m, log: log}
}

// Call is one tool call in a session's turn.
type Call struct {
	ID        string
	Name      string
	Args      map[string]any
	SessionID string
	UserID    string
	Mode      string
	Turn      int
}

// Outcome is the answer to one call.
type Outcome struct {
	Envelope tools.Envelope
	Duration time.Duration
	// Response is what the model is sent: {"output": data} or
	// {"error": {type, message, retryable}}.
	Response map[string]any
}

// RedactedArgs returns the arguments as the browser and logs may see them:
// only the keys the tool's allow-list names keep their values. Arguments of
// unknown tools are all redacted.
func (o *Orchestrator) RedactedArgs(name string, args map[string]any) map[string]any {
	if t, ok := o.reg.Lookup(name); ok {
		return t.RedactArgs(args)
	}
	out := make(map[string]any, len(args))
	for k := range args {
		out[k] = "[redacted]"
	}
	return out
}

// Execute runs one call through the pipeline. It never panics and always
// returns an answer for the model.
func (o *Orchestrator) Execute(ctx context.Context, c Call) Outcome {
	start := time.Now()
	label := c.Name
	env := o.run(ctx, c, &label)
	d := time.Since(start)
	env.Meta.DurationMs = d.Milliseconds()
	out := Outcome{Envelope: env, Duration: d, Response: modelResponse(env)}

	outcome := "ok"
	if !env.OK {
		outcome = string(env.Error.Type)
	}
	o.m.ToolCalls.WithLabelValues(label, strings.ToLower(outcome)).Inc()
	o.m.ToolDuration.WithLabelValues(label).Observe(d.Seconds())
	if b, err := json.Marshal(out.Response); err == nil {
		o.m.ToolResultBytes.WithLabelValues(label).Observe(float64(len(b)))
	}
	log := o.log.With("session", c.SessionID, "turn", c.Turn, "tool", label, "call", c.ID)
	if env.OK {
		log.Debug("tool call done", "duration_ms", d.Milliseconds())
	} else {
		log.Info("tool call failed", "error_type", env.Error.Type, "duration_ms", d.Milliseconds())
	}
	return out
}

func (o *Orchestrator) run(ctx context.Context, c Call, label *string) tools.Envelope {
	t, ok := o.reg.Lookup(c.Name)
	if !ok {
		*label = unknownTool
		return tools.Fail(tools.ErrNotFound, "there is no tool with that name; use one of the declared tools", false, false)
	}
	if !t.AllowedIn(c.Mode) {
		return tools.Fail(tools.ErrModeRestricted, fmt.Sprintf("%s is not available in %s mode", t.Name, c.Mode), false, false)
	}
	raw, err := json.Marshal(nonNil(c.Args))
	if err != nil {
		return tools.Fail(tools.ErrValidation, "arguments are not JSON-encodable", false, false)
	}
	if err := t.ValidateArgs(raw); err != nil {
		return tools.Fail(tools.ErrValidation, err.Error(), false, false)
	}
	env := o.execute(ctx, t, tools.Call{ID: c.ID, SessionID: c.SessionID, UserID: c.UserID, Mode: c.Mode, Args: raw})
	return checkEnvelope(env)
}

// execute runs the handler with the tool's hard timeout. A handler that
// overruns is answered TIMEOUT at once; its context is cancelled and its
// late result dropped.
func (o *Orchestrator) execute(ctx context.Context, t *tools.Tool, call tools.Call) tools.Envelope {
	if ctx.Err() != nil {
		return tools.Fail(tools.ErrTransient, "the call was cancelled before it started", true, false)
	}
	ctx, cancel := context.WithTimeout(ctx, t.Timeout())
	defer cancel()
	done := make(chan tools.Envelope, 1)
	start := time.Now()
	go func() {
		defer func() {
			if r := recover(); r != nil {
				o.log.Error("tool handler panicked", "tool", t.Name, "call", call.ID, "panic", fmt.Sprint(r),
					"stack", string(debug.Stack()))
				done <- tools.Fail(tools.ErrInternal, "the tool failed unexpectedly", false, true)
			}
		}()
		done <- t.Handler.Handle(ctx, call)
	}()
	select {
	case env := <-done:
		if soft := t.SoftLatency(); soft > 0 && time.Since(start) > soft {
			o.log.Warn("tool call over its soft latency budget", "tool", t.Name, "call", call.ID,
				"duration_ms", time.Since(start).Milliseconds(), "budget_ms", soft.Milliseconds())
		}
		return env
	case <-ctx.Done():
		if ctx.Err() == context.DeadlineExceeded {
			return tools.Fail(tools.ErrTimeout, fmt.Sprintf("%s did not answer within %s", t.Name, t.Timeout()), true, true)
		}
		return tools.Fail(tools.ErrTransient, "the call was cancelled", true, true)
	}
}

// checkEnvelope turns a malformed envelope into an INTERNAL error rather
// than passing nonsense to the model.
func checkEnvelope(env tools.Envelope) tools.Envelope {
	switch {
	case env.OK && env.Error != nil, !env.OK && env.Error == nil:
		return tools.Fail(tools.ErrInternal, "the tool returned a malformed result", false, true)
	case !env.OK && env.Error.Type == "":
		env.Error.Type = tools.ErrInternal
	}
	for _, in := range env.Intents {
		if err := in.Validate(); err != nil {
			return tools.Fail(tools.ErrInternal, "the tool returned an invalid intent", false, true)
		}
	}
	return env
}

func modelResponse(env tools.Envelope) map[string]any {
	if env.OK {
		data := env.Data
		if data == nil {
			data = "ok"
		}
		return map[string]any{"output": data}
	}
	return map[string]any{"error": map[string]any{
		"type": string(env.Error.Type), "message": env.Error.Message, "retryable": env.Error.Retryable,
	}}
}

func nonNil(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
