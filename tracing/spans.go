package tracing

import (
	"context"
	"encoding/json"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// The gateway's own span attributes and events, beside the GenAI semantic
// conventions' (docs/observability.md lists them all).
const (
	AttrTurn         = attribute.Key("turnstile.turn")
	AttrMode         = attribute.Key("turnstile.mode")
	AttrEndReason    = attribute.Key("turnstile.turn.end_reason")
	AttrFirstChunkMs = attribute.Key("turnstile.model.time_to_first_chunk_ms")
	// AttrVoiceResponseMs is a voice turn's voice-to-voice latency (the end
	// of the user's speech to the first answer audio), on its root span.
	AttrVoiceResponseMs = attribute.Key("turnstile.voice.response_ms")
	AttrToolOutcome     = attribute.Key("turnstile.tool.outcome") // ok, error, refused
	AttrToolErrorType   = attribute.Key("turnstile.tool.error_type")
	AttrToolLoopRule    = attribute.Key("turnstile.tool.loop_rule")
	AttrToolConfirm     = attribute.Key("turnstile.tool.confirmation") // asked, approved
	AttrToolResultSize  = attribute.Key("turnstile.tool.result_chars") // characters of the response's JSON
	AttrToolShaped      = attribute.Key("turnstile.tool.shaped")
	AttrToolReplayed    = attribute.Key("turnstile.tool.replayed")
	AttrConfirmOutcome  = attribute.Key("turnstile.confirmation.outcome") // approved, denied, expired

	EventSoftLatency    = "turnstile.tool.soft_latency_exceeded"
	EventBargeIn        = "turnstile.voice.barge_in"
	EventGoAway         = "turnstile.voice.upstream_go_away"
	EventResumed        = "turnstile.voice.upstream_resumed"
	EventSuppressAudio  = "turnstile.voice.suppress_audio"
	EventSuppressScript = "turnstile.voice.suppress_transcript"
)

// Tool outcomes (AttrToolOutcome).
const (
	OutcomeOK      = "ok"
	OutcomeError   = "error"
	OutcomeRefused = "refused"
)

// GenAI provider names (gen_ai.provider.name) of the gateway's models.
const (
	ProviderGemini   = "gcp.gemini"
	ProviderVertexAI = "gcp.vertex_ai"
	ProviderOpenAI   = "openai"
)

// Turn is who and what a turn's root span describes.
type Turn struct {
	Session string
	User    string // the raw user ID; the span shows only its pseudonym
	N       int
	Mode    string
	// Link is the span the browser named in session.start (traceparent);
	// the turn's trace links to it. Zero: none.
	Link trace.SpanContext
}

type captureKey struct{}

// StartTurn starts the root span of a turn's trace, invoke_agent: a new
// trace, linked to the browser's span if it sent one. With tracing off it
// returns ctx and a span that records nothing, without allocating.
func (p *Provider) StartTurn(ctx context.Context, t Turn) (context.Context, trace.Span) {
	if p == nil {
		return ctx, trace.SpanFromContext(context.Background())
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			semconv.GenAIOperationNameInvokeAgent,
			semconv.GenAIAgentName(DefaultServiceName),
			semconv.GenAIConversationID(t.Session),
			semconv.EnduserPseudoID(p.users.Of(t.User)),
			AttrTurn.Int(t.N),
			AttrMode.String(t.Mode),
		)}
	if t.Link.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: t.Link}))
	}
	ctx, span := p.tracer.Start(ctx, "invoke_agent", opts...)
	if p.capture {
		ctx = context.WithValue(ctx, captureKey{}, true)
	}
	return ctx, span
}

// EndTurn ends a turn's root span with the turn.done reason; a turn that
// ended in an error has an error status.
func EndTurn(span trace.Span, reason string) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(AttrEndReason.String(reason))
	if reason == "error" {
		span.SetStatus(codes.Error, "the turn ended in an error")
	}
	span.End()
}

// Capturing reports whether message content may go into the spans of the
// turn ctx belongs to (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT).
func Capturing(ctx context.Context) bool {
	on, _ := ctx.Value(captureKey{}).(bool)
	return on
}

// child starts a span under ctx's span when that one records, with the
// tracer of its own provider; otherwise it returns ctx and that span.
func child(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	return parent.TracerProvider().Tracer(ScopeName).Start(ctx, name, trace.WithSpanKind(kind),
		trace.WithAttributes(attrs...))
}

// StartChat starts a "chat {model}" span for one model request under the
// turn's span.
func StartChat(ctx context.Context, provider, model string) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return child(ctx, "chat "+model, trace.SpanKindClient, semconv.GenAIOperationNameChat,
		semconv.GenAIProviderNameKey.String(provider), semconv.GenAIRequestModel(model))
}

// StartTool starts an "execute_tool {name}" span for one tool call under
// the turn's span.
func StartTool(ctx context.Context, name, callID string) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return child(ctx, "execute_tool "+name, trace.SpanKindInternal, semconv.GenAIOperationNameExecuteTool,
		semconv.GenAIToolName(name), semconv.GenAIToolCallID(callID))
}

// Event adds an event to ctx's span, when it records.
func Event(ctx context.Context, name string, attrs ...attribute.KeyValue) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent(name, trace.WithAttributes(attrs...))
	}
}

// Messages is the gen_ai.input.messages / gen_ai.output.messages JSON of
// one text in one role (the conventions' message format).
func Messages(role, text string) attribute.KeyValue {
	b, _ := json.Marshal([]map[string]any{{"role": role, "parts": []map[string]string{{"type": "text", "content": text}}}})
	key := semconv.GenAIInputMessagesKey
	if role != "user" {
		key = semconv.GenAIOutputMessagesKey
	}
	return key.String(string(b))
}

// JSON is an attribute holding v as JSON (tool arguments and results that
// went through their allow-lists).
func JSON(key attribute.Key, v any) attribute.KeyValue {
	b, err := json.Marshal(v)
	if err != nil {
		return key.String("")
	}
	return key.String(string(b))
}

// InjectHeader adds the W3C traceparent (and tracestate) of ctx's span to
// h, for the HTTP request a tool call makes; without a span, nothing.
func InjectHeader(ctx context.Context, h http.Header) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// Carrier is the W3C trace context of ctx's span as MCP _meta entries
// ("traceparent", and "tracestate" when there is one); nil without a span.
func Carrier(ctx context.Context) map[string]any {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	out := make(map[string]any, len(c))
	for k, v := range c {
		out[k] = v
	}
	return out
}

// Link is the span a W3C traceparent names (as session.start carries it),
// for a turn's trace to link to; zero when it does not parse.
func Link(traceparent string) trace.SpanContext {
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	return trace.SpanContextFromContext(ctx)
}

// Confirmation records the user's answer to a confirmation (approved,
// denied or expired) as a span of its own, "confirm {tool}": the answer
// comes between turns, so it is a short trace beside them, found by the
// same gen_ai.conversation.id. t.N is the turn that asked.
func (p *Provider) Confirmation(ctx context.Context, t Turn, tool, outcome string) {
	if p == nil {
		return
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithAttributes(
		semconv.GenAIConversationID(t.Session), semconv.EnduserPseudoID(p.users.Of(t.User)),
		AttrTurn.Int(t.N), AttrMode.String(t.Mode), semconv.GenAIToolName(tool), AttrToolConfirm.String(outcome))}
	if t.Link.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: t.Link}))
	}
	_, span := p.tracer.Start(ctx, "confirm "+tool, opts...)
	span.End()
}
