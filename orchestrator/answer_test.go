package orchestrator_test

import (
	"context"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/tools"
)

// Exactly one answer per call, through the public API, and the call ledger
// kept in Redis.

func TestAnswerIsTrueOnceForRefusedDoneAndTimedOutCalls(t *testing.T) {
	f := newFixture(t)
	tr := textTurn(f)
	res := tr.Handle(t.Context(), []orchestrator.Call{
		call("refused", "no_such_tool", nil),
		call("done", "echo", map[string]any{"text": "hi"}),
		call("timed-out", "quitter", nil),
	}, nil)
	if errType(res[2].Outcome) != tools.ErrTimeout {
		t.Fatalf("quitter: %+v, want TIMEOUT", res[2].Outcome.Envelope)
	}
	for _, r := range res {
		if !r.Send || !tr.Answer(r.Call.ID) {
			t.Errorf("%s: send %v, first Answer false; want it answered", r.Call.ID, r.Send)
		}
		if tr.Answer(r.Call.ID) {
			t.Errorf("%s answered twice", r.Call.ID)
		}
	}
	if tr.Answer("never-seen") {
		t.Error("Answer of an unknown id reported true")
	}
}

func TestCancelledCallIsNeverAnswered(t *testing.T) {
	f := newFixture(t)
	r := newRedisStores(t)
	o := f.with(orchestrator.Config{}, r.deps())
	tr := o.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeVoice}, 1, nil)

	done := make(chan []orchestrator.Result, 1)
	go func() {
		done <- tr.Handle(context.Background(), []orchestrator.Call{call("long", "sleepy", map[string]any{"ms": 1000})}, nil)
	}()
	time.Sleep(30 * time.Millisecond) // the call is running by now
	start := time.Now()
	tr.Cancel("long")
	res := <-done
	// The handler sleeps 1 s unless its context ends.
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("Handle returned %v after Cancel, want the running handler's context cancelled at once", d)
	}
	if tr.Answer("long") {
		t.Error("a cancelled call was answered")
	}
	if res[0].Outcome.Envelope.OK {
		t.Errorf("cancelled call outcome %+v, want an error", res[0].Outcome.Envelope)
	}
	recs := r.ledger(t, "s")
	if len(recs) != 1 || recs[0].State != orchestrator.StateCancelled {
		t.Errorf("ledger %+v, want one cancelled record", recs)
	}
}

func TestCancelAllWithholdsRunningCallsOnly(t *testing.T) {
	f := newFixture(t)
	tr := textTurn(f)
	first := tr.Handle(t.Context(), []orchestrator.Call{call("early", "echo", map[string]any{"text": "hi"})}, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tr.Handle(context.Background(), []orchestrator.Call{
			call("a", "sleepy", map[string]any{"ms": 1000}), call("b", "sleepy", map[string]any{"ms": 999}),
		}, nil)
	}()
	time.Sleep(30 * time.Millisecond)
	start := time.Now()
	tr.CancelAll()
	<-done
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("Handle returned %v after CancelAll, want the running handlers' contexts cancelled at once", d)
	}
	if tr.Answer("a") || tr.Answer("b") {
		t.Error("a call cancelled by CancelAll was answered")
	}
	if !first[0].Send || !tr.Answer("early") {
		t.Error("a call that had finished before CancelAll lost its answer")
	}
	if f.runs("sleepy") > 2 {
		t.Errorf("sleepy ran %d times", f.runs("sleepy"))
	}
}

func TestDuplicateCallIDIsNotSentAndRunsOnce(t *testing.T) {
	f := newFixture(t)
	tr := textTurn(f)
	res := tr.Handle(t.Context(), []orchestrator.Call{
		call("x", "echo", map[string]any{"text": "first"}),
		call("x", "echo", map[string]any{"text": "second"}),
	}, nil)
	if !res[0].Send || res[1].Send {
		t.Fatalf("send = %v, %v; want the first only", res[0].Send, res[1].Send)
	}
	if got := res[0].Outcome.Response["output"].(map[string]any)["echo"]; got != "first" {
		t.Errorf("answer %v, want the first call's", got)
	}
	if f.echoRuns.Load() != 1 {
		t.Errorf("echo ran %d times, want 1", f.echoRuns.Load())
	}
	// A repeat of the id in a later message of the turn is a duplicate too.
	again := tr.Handle(t.Context(), []orchestrator.Call{call("x", "echo", map[string]any{"text": "third"})}, nil)
	if again[0].Send || f.echoRuns.Load() != 1 {
		t.Errorf("repeat in a later message: send %v, runs %d; want not sent, not run", again[0].Send, f.echoRuns.Load())
	}
	if !tr.Answer("x") || tr.Answer("x") {
		t.Error("the id was not answered exactly once")
	}
	if tr.Calls() != 1 {
		t.Errorf("Calls() = %d, want duplicates not counted by the gates", tr.Calls())
	}
}

func TestLedgerRecordsOneEntryPerCall(t *testing.T) {
	f := newFixture(t)
	r := newRedisStores(t)
	o := f.with(orchestrator.Config{}, r.deps())
	tr := o.NewTurn(orchestrator.Session{ID: "sess-L", UserID: "u", Mode: tools.ModeText}, 3, nil)
	tr.Handle(t.Context(), []orchestrator.Call{
		call("ok", "search", map[string]any{"query": "nothing at all"}),
		call("ok", "echo", map[string]any{"text": "dup"}),
		call("unknown", "no_such_tool", map[string]any{"q": 1}),
		call("invalid", "echo", map[string]any{}),
		call("slow", "quitter", nil),
	}, nil)

	recs := r.ledger(t, "sess-L")
	byID := map[string]orchestrator.CallRecord{}
	for _, rec := range recs {
		if _, dup := byID[rec.ID]; dup {
			t.Errorf("two ledger records for %s", rec.ID)
		}
		byID[rec.ID] = rec
	}
	want := map[string]struct {
		tool    string
		state   orchestrator.CallState
		outcome string
	}{
		"ok":      {"search", orchestrator.StateDone, "ok"},
		"unknown": {"unknown", orchestrator.StateRefused, "not_found"},
		"invalid": {"echo", orchestrator.StateRefused, "validation"},
		"slow":    {"quitter", orchestrator.StateTimedOut, "timeout"},
	}
	if len(recs) != len(want) {
		t.Fatalf("ledger has %d records %+v, want %d", len(recs), recs, len(want))
	}
	for id, w := range want {
		rec := byID[id]
		if rec.Tool != w.tool || rec.State != w.state || rec.Outcome != w.outcome {
			t.Errorf("%s: record %+v, want tool %s state %s outcome %s", id, rec, w.tool, w.state, w.outcome)
		}
	}
	if !byID["ok"].Empty || byID["ok"].ArgsDigest == "" {
		t.Errorf("search record %+v, want empty=true and an args digest", byID["ok"])
	}
}

func TestBookkeepingIsOneRedisRoundTripPerCall(t *testing.T) {
	f := newFixture(t)
	r := newRedisStores(t)
	o := f.with(orchestrator.Config{}, r.deps())
	s := orchestrator.Session{ID: "sess-R", UserID: "u", Mode: tools.ModeText}

	for i, calls := range [][]orchestrator.Call{
		{call("a", "noop", nil)},
		{call("b", "no_such_tool", nil)},
		{call("c", "echo", map[string]any{"text": "x"}), call("d", "voice_only", nil), call("e", "echo", map[string]any{})},
	} {
		tr := o.NewTurn(s, i+1, nil)
		before := r.trips.Load()
		tr.Handle(t.Context(), calls, nil)
		if got := r.trips.Load() - before; got != int64(len(calls)) {
			t.Errorf("message %d: %d Redis round trips for %d calls, want one per call", i, got, len(calls))
		}
	}
	if n := len(r.ledger(t, "sess-R")); n != 5 {
		t.Errorf("ledger has %d records, want 5", n)
	}
}
