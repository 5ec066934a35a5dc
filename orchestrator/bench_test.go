package orchestrator_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/tools"
)

// benchOrchestrator logs as production does: JSON at Info, so the per-call
// Debug line is formatted never but its logger is still built.
func benchOrchestrator(b *testing.B) *orchestrator.Orchestrator {
	f := newFixture(b)
	return orchestrator.New(f.tools, f.m, slog.New(slog.NewJSONHandler(io.Discard, nil)))
}

// BenchmarkExecute measures the pipeline's own cost (lookup, mode check,
// argument encoding and validation, the handler goroutine and timeout,
// envelope check, metrics, logging) around a handler that does nothing.
func BenchmarkExecute(b *testing.B) {
	o := benchOrchestrator(b)
	call := orchestrator.Call{ID: "c1", Name: "noop", SessionID: "s1", UserID: "u1", Mode: tools.ModeText, Turn: 1}
	b.ReportAllocs()
	for b.Loop() {
		if out := o.Execute(b.Context(), call); !out.Envelope.OK {
			b.Fatalf("envelope = %+v", out.Envelope)
		}
	}
}

// BenchmarkExecuteWithArgs adds validation of a one-property argument object.
func BenchmarkExecuteWithArgs(b *testing.B) {
	o := benchOrchestrator(b)
	call := orchestrator.Call{ID: "c1", Name: "echo", Args: map[string]any{"text": "hello"}, SessionID: "s1",
		UserID: "u1", Mode: tools.ModeText, Turn: 1}
	b.ReportAllocs()
	for b.Loop() {
		if out := o.Execute(b.Context(), call); !out.Envelope.OK {
			b.Fatalf("envelope = %+v", out.Envelope)
		}
	}
}
