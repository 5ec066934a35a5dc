package orchestrator

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tracing"
)

// The execute_tool span of a call (tracing.StartTool, in Handle) learns
// what the pipeline decided here. With tracing off ctx holds no recording
// span and each of these returns at once.

// traceAttr sets one attribute on the call's span.
func traceAttr(ctx context.Context, kv attribute.KeyValue) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(kv)
	}
}

// traceSoftLatency marks a call that went over its soft latency budget.
func traceSoftLatency(ctx context.Context, d, budget time.Duration) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent(tracing.EventSoftLatency, trace.WithAttributes(
			attribute.Int64("turnstile.tool.duration_ms", d.Milliseconds()),
			attribute.Int64("turnstile.tool.soft_latency_ms", budget.Milliseconds())))
	}
}

// traceOutcome records a call's outcome on its span: ok, error or refused,
// the error type (and an error status for a failure), the size of the
// response in characters and whether it was shaped. With content capture on, the
// arguments and result go in too, through the tool's allow-lists only.
func traceOutcome(ctx context.Context, reg *tools.Registry, c Call, out Outcome, chars int) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	env := out.Envelope
	outcome := tracing.OutcomeOK
	switch {
	case out.Refused:
		outcome = tracing.OutcomeRefused
	case !env.OK:
		outcome = tracing.OutcomeError
	}
	attrs := []attribute.KeyValue{tracing.AttrToolOutcome.String(outcome), tracing.AttrToolResultSize.Int(chars)}
	if env.OK {
		attrs = append(attrs, tracing.AttrToolShaped.Bool(env.Meta.Truncated))
	} else {
		attrs = append(attrs, tracing.AttrToolErrorType.String(string(env.Error.Type)),
			semconv.ErrorTypeKey.String(string(env.Error.Type)))
	}
	if tracing.Capturing(ctx) {
		attrs = append(attrs, tracing.JSON(semconv.GenAIToolCallArgumentsKey, redactedArgs(reg, c.Name, c.Args)))
		if out.Shown != nil {
			attrs = append(attrs, tracing.JSON(semconv.GenAIToolCallResultKey, out.Shown))
		}
	}
	span.SetAttributes(attrs...)
	if outcome == tracing.OutcomeError {
		span.SetStatus(codes.Error, string(env.Error.Type))
	}
}

// traceReplay records a call answered again from the ledger.
func traceReplay(ctx context.Context, out Outcome) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() || !out.Replayed {
		return
	}
	outcome := tracing.OutcomeOK
	if !out.Envelope.OK {
		outcome = tracing.OutcomeError
	}
	span.SetAttributes(tracing.AttrToolOutcome.String(outcome), tracing.AttrToolReplayed.Bool(true))
}
