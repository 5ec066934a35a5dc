package textturn

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/turnstile-gw/turnstile/tracing"
	"github.com/turnstile-gw/turnstile/transport"
)

// traceFirstChunk records the time from the request to the model's first
// chunk on the chat span.
func traceFirstChunk(span trace.Span, d time.Duration) {
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrFirstChunkMs.Int64(d.Milliseconds()))
	}
}

// endChat ends a chat span with the usage the model reported (when it
// did) and, for a failed request, its outcome as the error type.
func endChat(span trace.Span, u transport.Usage, failure string) {
	if !span.IsRecording() {
		return
	}
	if u.InputTokens > 0 || u.OutputTokens > 0 {
		span.SetAttributes(semconv.GenAIUsageInputTokens(u.InputTokens), semconv.GenAIUsageOutputTokens(u.OutputTokens))
	}
	if failure != "" {
		span.SetAttributes(semconv.ErrorTypeKey.String(failure))
		span.SetStatus(codes.Error, failure)
	}
	span.End()
}

// traceAnswer puts the turn's final answer on its root span, when message
// content is captured.
func traceAnswer(ctx context.Context, text string) {
	if tracing.Capturing(ctx) {
		trace.SpanFromContext(ctx).SetAttributes(tracing.Messages("assistant", text))
	}
}
