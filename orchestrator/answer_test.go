package orchestrator_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/transport"
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
	tr := o.NewTurn(r.session(t, "s", "u", tools.ModeVoice), 1, nil)

	done := make(chan []orchestrator.Result, 1)
	go func() {
		done <- tr.Handle(context.Background(), []orchestrator.Call{call("long", "sleepy", map[string]any{"ms": 1000})}, nil)
	}()
	testwait.For(t, "the call to run", func() bool { return tr.State("long") == orchestrator.StateRunning })
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
	if len(recs) != 1 || recs[0].State != orchestrator.StateClaimed {
		t.Errorf("ledger %+v, want one claimed record that was never answered", recs)
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
	testwait.For(t, "both calls to run", func() bool {
		return tr.State("a") == orchestrator.StateRunning && tr.State("b") == orchestrator.StateRunning
	})
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

// round runs one message's calls through Round, as the session loops do.
func round(t *testing.T, tr *orchestrator.Turn, calls ...orchestrator.Call) orchestrator.Round {
	t.Helper()
	fcs := make([]transport.FunctionCall, len(calls))
	for i, c := range calls {
		fcs[i] = transport.FunctionCall{ID: c.ID, Name: c.Name, Args: c.Args}
	}
	return tr.Round(t.Context(), fcs, nil)
}

func TestLedgerRecordsEachAnsweredCallWithItsResponse(t *testing.T) {
	f := newFixture(t)
	r := newRedisStores(t)
	o := f.with(orchestrator.Config{}, r.deps())
	tr := o.NewTurn(r.session(t, "sess-L", "u", tools.ModeText), 3, nil)
	rd := round(t, tr,
		call("ok", "search", map[string]any{"query": "nothing at all"}),
		call("ok", "echo", map[string]any{"text": "dup"}),
		call("unknown", "no_such_tool", map[string]any{"q": 1}),
		call("invalid", "echo", map[string]any{}),
		call("slow", "quitter", nil),
	)
	sent := map[string]map[string]any{}
	for _, resp := range rd.Responses {
		sent[resp.ID] = resp.Response
	}

	recs := r.ledger(t, "sess-L")
	byID := map[string]orchestrator.CallRecord{}
	for _, rec := range recs {
		if _, dup := byID[rec.ID]; dup {
			t.Errorf("two ledger records for %s", rec.ID)
		}
		byID[rec.ID] = rec
	}
	want := map[string]struct{ tool, outcome string }{
		"ok":      {"search", "ok"},
		"unknown": {"unknown", "not_found"},
		"invalid": {"echo", "validation"},
		"slow":    {"quitter", "timeout"},
	}
	if len(recs) != len(want) || len(sent) != len(want) {
		t.Fatalf("ledger has %d records %+v and %d responses were sent, want %d", len(recs), recs, len(sent), len(want))
	}
	for id, w := range want {
		rec := byID[id]
		if rec.Tool != w.tool || rec.State != orchestrator.StateAnswered || rec.Outcome != w.outcome || rec.Turn != 3 {
			t.Errorf("%s: record %+v, want tool %s answered in turn 3 with outcome %s", id, rec, w.tool, w.outcome)
		}
		if !reflect.DeepEqual(jsonOf(t, rec.Response), jsonOf(t, sent[id])) {
			t.Errorf("%s: stored response %v, sent %v", id, rec.Response, sent[id])
		}
	}
	if !byID["ok"].Empty || byID["ok"].ArgsDigest == "" {
		t.Errorf("search record %+v, want empty=true and an args digest", byID["ok"])
	}
}

// A call ID the session already answered, seen again (a model re-sending a
// call after a reconnect, on any node), is answered again with the same
// response and runs no second time; metrics do not count it twice.
func TestAnsweredCallSeenAgainIsReplayedFromTheLedgerNotRun(t *testing.T) {
	f := newFixture(t)
	r := newRedisStores(t)
	s := r.session(t, "sess-replay", "u", tools.ModeVoice)
	first := round(t, f.with(orchestrator.Config{}, r.deps()).NewTurn(s, 1, nil),
		call("call-1", "echo", map[string]any{"text": "once"}))
	// Another node: its own orchestrator, the same Redis.
	g := newFixture(t)
	again := round(t, g.with(orchestrator.Config{}, r.deps()).NewTurn(s, 2, nil),
		call("call-1", "echo", map[string]any{"text": "once"}))
	if f.echoRuns.Load()+g.echoRuns.Load() != 1 {
		t.Fatalf("echo ran %d times, want once", f.echoRuns.Load()+g.echoRuns.Load())
	}
	if len(again.Responses) != 1 || !reflect.DeepEqual(jsonOf(t, again.Responses[0]), jsonOf(t, first.Responses[0])) {
		t.Fatalf("replayed %+v, want exactly the first answer %+v", again.Responses, first.Responses)
	}
	if !again.Results[0].Outcome.Replayed {
		t.Error("the outcome is not marked replayed")
	}
	if got := testutil.ToFloat64(g.m.ToolCalls.WithLabelValues("echo", "ok", "browser")); got != 0 {
		t.Errorf("the replay was counted as a tool call (%v)", got)
	}
}

// A call claimed but never answered (its node died mid-call) is not run a
// second time: the model is told that its outcome is unknown.
func TestClaimedButUnansweredCallIsAnsweredWithUnknownOutcome(t *testing.T) {
	f := newFixture(t)
	r := newRedisStores(t)
	s := r.session(t, "sess-lost", "u", tools.ModeText)
	if _, err := r.store.Claim(t.Context(), s.ID, s.Epoch, []orchestrator.CallRecord{{ID: "lost", Tool: "echo", Turn: 1,
		State: orchestrator.StateClaimed}}); err != nil {
		t.Fatal(err)
	}
	rd := round(t, f.with(orchestrator.Config{}, r.deps()).NewTurn(s, 2, nil),
		call("lost", "echo", map[string]any{"text": "again"}))
	if f.echoRuns.Load() != 0 {
		t.Fatal("the call ran a second time")
	}
	if len(rd.Responses) != 1 || rd.Responses[0].Response["ok"] != false {
		t.Fatalf("responses %+v, want one error", rd.Responses)
	}
	e := rd.Responses[0].Response["error"].(map[string]any)
	if e["type"] != "TRANSIENT" || e["retryable"] != false || rd.Responses[0].Response["partialSideEffects"] != true ||
		!strings.Contains(e["message"].(string), "outcome is unknown") {
		t.Errorf("response %+v, want a non-retryable TRANSIENT error saying the outcome is unknown", rd.Responses[0].Response)
	}
}

func TestBookkeepingIsTwoRedisRoundTripsPerMessage(t *testing.T) {
	f := newFixture(t)
	r := newRedisStores(t)
	o := f.with(orchestrator.Config{}, r.deps())
	s := r.session(t, "sess-R", "u", tools.ModeText)
	// Redis caches the ledger's scripts at their first use (one extra
	// round trip each, once per server): warm them up elsewhere.
	round(t, o.NewTurn(r.session(t, "warm-up", "u", tools.ModeText), 1, nil),
		call("w", "noop", nil))

	for i, calls := range [][]orchestrator.Call{
		{call("a", "noop", nil)},
		{call("b", "no_such_tool", nil)},
		{call("c", "echo", map[string]any{"text": "x"}), call("d", "voice_only", nil), call("e", "echo", map[string]any{})},
	} {
		tr := o.NewTurn(s, i+1, nil)
		before := r.trips.Load()
		round(t, tr, calls...)
		if got := r.trips.Load() - before; got != 2 {
			t.Errorf("message %d: %d Redis round trips for %d calls, want two (claim, answer)", i, got, len(calls))
		}
	}
	if n := len(r.ledger(t, "sess-R")); n != 5 {
		t.Errorf("ledger has %d records, want 5", n)
	}
}

func jsonOf(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
