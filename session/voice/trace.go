package voice

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// traceNote is a span event waiting for the next turn.
type traceNote struct {
	name  string
	attrs []attribute.KeyValue
}

// maxTraceNotes bounds the events kept between turns (an upstream that goes
// away again and again while nobody speaks).
const maxTraceNotes = 8

// traceEventLocked adds an upstream event to the spans of the open turns,
// or keeps it for the next turn's span when none is open. Called with v.mu
// held; with tracing off it does nothing.
func (v *Session) traceEventLocked(name string, attrs ...attribute.KeyValue) {
	if v.d.Turns.Tracing == nil {
		return
	}
	if len(v.open) == 0 {
		if len(v.traceNotes) < maxTraceNotes {
			v.traceNotes = append(v.traceNotes, traceNote{name: name, attrs: attrs})
		}
		return
	}
	for _, t := range v.open {
		t.Span.AddEvent(name, trace.WithAttributes(attrs...))
	}
}
