package mcp_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/turnstile-gw/turnstile/internal/mcptest"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/tools"
)

// A call to an MCP tool over Streamable HTTP carries its execute_tool span,
// as a traceparent header and in the call's _meta.
func TestMCPCallOverHTTPCarriesTheToolSpanAsTraceparent(t *testing.T) {
	srv := mcptest.NewHTTP()
	defer srv.Close()
	f := startHub(t, map[string]any{"notes": map[string]any{"url": srv.URL}}, nil)
	reg := f.registry()

	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, root := tp.Tracer("test").Start(context.Background(), "invoke_agent")
	o := orchestrator.New(reg, f.metrics, testLog(t))
	out := o.Execute(ctx, orchestrator.Call{ID: "c1", Name: "notes__echo", Args: map[string]any{"text": "hi"},
		SessionID: "s1", Mode: tools.ModeText, Turn: 1})
	root.End()
	if !out.Envelope.OK {
		t.Fatalf("echo: %+v", out.Response)
	}
	var tool trace.SpanContext
	for _, s := range spans.GetSpans() {
		if s.Name == "execute_tool notes__echo" {
			tool = s.SpanContext
		}
	}
	if !tool.IsValid() {
		t.Fatalf("no execute_tool span among %d", len(spans.GetSpans()))
	}
	want := "00-" + tool.TraceID().String() + "-" + tool.SpanID().String() + "-01"
	if got, _ := srv.Traceparent.Load().(string); got != want {
		t.Errorf("traceparent header %q, want %q", got, want)
	}
	if got, _ := srv.EchoTraceparent.Load().(string); got != want {
		t.Errorf("_meta traceparent %q, want %q", got, want)
	}
}
