// Package tracing exports the gateway's OpenTelemetry traces: one trace per
// turn, with a root invoke_agent span, chat spans per model request and
// execute_tool spans per tool call, following the GenAI semantic
// conventions (attrs.go). It is configured only by the SDK's standard
// OTEL_* variables (settings.go); with none set it is off, and then every
// helper here returns at once without allocating: a nil *Provider is valid
// and traces nothing.
//
// Spans are exported by the SDK's batch span processor on its own
// goroutine: ending a span never waits for the collector. Spans that do not
// fit the queue, or whose export failed, are counted (Options.Dropped).
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/pseudonym"
	"github.com/turnstile-gw/turnstile/internal/throttle"
)

// ScopeName is the instrumentation scope of the gateway's spans.
const ScopeName = "github.com/turnstile-gw/turnstile"

// DefaultServiceName is service.name unless OTEL_SERVICE_NAME or
// OTEL_RESOURCE_ATTRIBUTES say otherwise.
const DefaultServiceName = "turnstile"

// Drop reasons of Options.Dropped (the metric's label values).
const (
	DropQueueFull    = "queue_full"
	DropExportFailed = "export_failed"
)

// DropReasons are the closed set of Options.Dropped reasons.
var DropReasons = []string{DropQueueFull, DropExportFailed}

// Options are what Start needs besides the settings.
type Options struct {
	ServiceVersion string
	// Users makes the pseudonym a turn's user is shown by.
	Users pseudonym.Key
	// Dropped is told about spans that were never exported (reason is one
	// of DropReasons); nil: not counted.
	Dropped func(reason string, n int)
	Log     *slog.Logger
}

// Provider makes the gateway's spans. A nil Provider traces nothing.
type Provider struct {
	tp      *sdktrace.TracerProvider
	tracer  trace.Tracer
	capture bool
	users   pseudonym.Key
}

// Start builds the tracer provider the settings ask for; with tracing off
// it returns nil and no error. The exporter does not connect before its
// first export, so a collector that is down does not stop the gateway.
func Start(ctx context.Context, s Settings, o Options) (*Provider, error) {
	if !s.Enabled {
		return nil, nil
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	var exp sdktrace.SpanExporter
	var err error
	switch s.Protocol {
	case ProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx)
	default:
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP %s exporter: %w", s.Protocol, err)
	}
	// The gateway's defaults first, the environment over them.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(DefaultServiceName), semconv.ServiceVersion(o.ServiceVersion)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: resource (OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	b := &bound{max: int64(s.MaxQueueSize), dropped: o.Dropped, log: o.Log}
	b.next = sdktrace.NewBatchSpanProcessor(&countingExporter{SpanExporter: exp, b: b},
		sdktrace.WithMaxQueueSize(s.MaxQueueSize))
	// The sampler comes from OTEL_TRACES_SAMPLER and _ARG (the SDK reads them).
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSpanProcessor(b))
	o.Log.Info("tracing on: OTLP export of one trace per turn", "protocol", s.Protocol,
		"capture_content", s.CaptureContent, "max_queue_size", s.MaxQueueSize)
	return &Provider{tp: tp, tracer: tp.Tracer(ScopeName), capture: s.CaptureContent, users: o.Users}, nil
}

// Shutdown exports what is queued, within ctx, and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.tp.Shutdown(ctx)
}

// ForceFlush exports what is queued now (tests, and the drain).
func (p *Provider) ForceFlush(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.tp.ForceFlush(ctx)
}

// bound keeps the number of spans between their end and the end of their
// export at the batch processor's queue size: a span that would not fit is
// dropped here, where it is counted, instead of silently in the processor
// (which never blocks either). An export that failed drops its spans, and
// is counted as such.
type bound struct {
	next     sdktrace.SpanProcessor
	max      int64
	inflight atomic.Int64
	dropped  func(string, int)
	log      *slog.Logger
	failures throttle.Log
}

func (b *bound) OnStart(parent context.Context, s sdktrace.ReadWriteSpan) { b.next.OnStart(parent, s) }

func (b *bound) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	if b.inflight.Add(1) > b.max {
		b.inflight.Add(-1)
		b.drop(DropQueueFull, 1)
		return
	}
	b.next.OnEnd(s)
}

func (b *bound) Shutdown(ctx context.Context) error   { return b.next.Shutdown(ctx) }
func (b *bound) ForceFlush(ctx context.Context) error { return b.next.ForceFlush(ctx) }

func (b *bound) drop(reason string, n int) {
	if b.dropped != nil {
		b.dropped(reason, n)
	}
}

// countingExporter tells bound when spans have left, and counts the spans
// of exports that failed.
type countingExporter struct {
	sdktrace.SpanExporter
	b *bound
}

func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	e.b.inflight.Add(-int64(len(spans)))
	if err != nil {
		e.b.drop(DropExportFailed, len(spans))
		if n, ok := e.b.failures.Note(clock.Wall.Now(), len(spans)); ok {
			e.b.log.Warn("tracing: span export failed; the spans are dropped", "err", err, "dropped_spans", n)
		}
	}
	return err
}
