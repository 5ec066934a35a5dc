package orchestrator_test

import (
	"io"
	"log/slog"
	"strconv"
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

// BenchmarkPipelineOverhead measures one call through NewTurn and Handle
// (every admission step, the handler goroutine, shaping, metrics and the
// ledger) around a handler that does nothing: without stores, and with the
// RedisStore ledger on an in-process miniredis, which adds the one
// bookkeeping round trip per call (TestBookkeepingIsOneRedisRoundTripPerCall).
func BenchmarkPipelineOverhead(b *testing.B) {
	f := newFixture(b)
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	r := newRedisStores(b)
	s := r.session(b, "bench", "u1", tools.ModeText)
	for _, bc := range []struct {
		name string
		deps orchestrator.Deps
	}{
		{"no_stores", orchestrator.Deps{}},
		{"redis_ledger", orchestrator.Deps{Ledger: r.store}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			d := bc.deps
			d.Registry, d.Metrics, d.Log = f.tools, f.m, log
			o := orchestrator.NewWith(orchestrator.Config{}, d)
			// Every call has an ID of its own: the durable ledger answers a
			// repeated ID from its record instead of running it.
			ids := make([]string, 0, 1<<16)
			for i := range cap(ids) {
				ids = append(ids, "c"+strconv.Itoa(i))
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				id := ids[i%len(ids)]
				i++
				tr := o.NewTurn(s, i, nil)
				calls := []orchestrator.Call{{ID: id, Name: "noop"}}
				if res := tr.Handle(b.Context(), calls, nil); !res[0].Outcome.Envelope.OK || !tr.Answer(id) {
					b.Fatalf("outcome %+v", res[0].Outcome.Envelope)
				}
			}
		})
	}
}
