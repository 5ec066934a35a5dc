package orchestrator_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/transport"
)

// A session resumed on another connection fences the old connection's
// ledger and confirmation writes (store.ErrFenced): its turn runs nothing
// more, answers nothing, and tells the session once that it was taken over.

// takenOverSession creates a session as one connection and resumes it as
// another; it returns the first, stale, owner's session, which counts how
// often it is told it was taken over, and the new owner's epoch.
func takenOverSession(t *testing.T, r *redisStores, id string) (orchestrator.Session, *atomic.Int64, int64) {
	t.Helper()
	rec, tok, err := r.store.Create(t.Context(), store.Record{ID: id, UserID: "u", Mode: tools.ModeText})
	if err != nil {
		t.Fatal(err)
	}
	owner, _, err := r.store.Resume(t.Context(), id, tok, "u")
	if err != nil {
		t.Fatal(err)
	}
	told := &atomic.Int64{}
	return orchestrator.Session{ID: id, UserID: "u", Mode: tools.ModeText, Epoch: rec.Epoch,
		TakenOver: func() { told.Add(1) }}, told, owner.Epoch
}

func TestFencedClaimRunsNoTool(t *testing.T) {
	f := newFixture(t)
	r := newRedisStores(t)
	o := f.with(orchestrator.Config{}, r.deps())
	stale, told, epoch := takenOverSession(t, r, "sess-fenced")

	tr := o.NewTurn(stale, 1, nil)
	ev := &events{}
	for i, ids := range [][]string{{"a", "b"}, {"c"}} { // two messages of the turn
		var calls []orchestrator.Call
		for _, id := range ids {
			calls = append(calls, call(id, "echo", map[string]any{"text": id}))
		}
		calls = append(calls, call(ids[0]+"-t", "transfer", transferArgs()))
		fcs := make([]transport.FunctionCall, len(calls))
		for j, c := range calls {
			fcs[j] = transport.FunctionCall{ID: c.ID, Name: c.Name, Args: c.Args}
		}
		rd := tr.Round(t.Context(), fcs, ev)
		if len(rd.Responses) != 0 {
			t.Fatalf("message %d: responses %+v, want none sent for a fenced turn", i, rd.Responses)
		}
		for _, res := range rd.Results {
			if res.Outcome.Envelope.OK || tr.State(res.Call.ID) != orchestrator.StateCancelled {
				t.Errorf("%s: %+v, state %s; want cancelled", res.Call.ID, res.Outcome.Envelope, tr.State(res.Call.ID))
			}
		}
	}
	if n := f.echoRuns.Load() + f.runs("transfer"); n != 0 {
		t.Fatalf("%d calls ran after the claim was fenced", n)
	}
	if recs := r.ledger(t, stale.ID); len(recs) != 0 {
		t.Fatalf("ledger %+v, want nothing recorded by the old owner", recs)
	}
	if len(ev.confirmations()) != 0 {
		t.Fatal("a confirmation was requested on a fenced turn")
	}
	if n := told.Load(); n != 1 {
		t.Fatalf("TakenOver called %d times, want once", n)
	}
	if logs := f.log.String(); strings.Contains(logs, "level=WARN") || strings.Contains(logs, "level=ERROR") ||
		!strings.Contains(logs, "session taken over by another connection") {
		t.Fatalf("log:\n%s\nwant the takeover said once at INFO and no warning or error", logs)
	}

	// The new owner's turn claims the same IDs and runs them.
	owner := stale
	owner.Epoch, owner.TakenOver = epoch, nil
	rd := round(t, o.NewTurn(owner, 2, nil), call("a", "echo", map[string]any{"text": "a"}))
	if f.echoRuns.Load() != 1 || len(rd.Responses) != 1 || rd.Responses[0].Response["ok"] != true {
		t.Fatalf("the owner's call: runs %d, responses %+v", f.echoRuns.Load(), rd.Responses)
	}
}

func TestFencedConfirmationRequestAsksNobody(t *testing.T) {
	f := newFixture(t)
	r := newRedisStores(t)
	o := f.with(orchestrator.Config{}, orchestrator.Deps{Confirms: r.store}) // no ledger: the confirmation is the first write
	stale, told, _ := takenOverSession(t, r, "sess-fenced-confirm")

	ev := &events{}
	tr := o.NewTurn(stale, 1, nil)
	out := handleOne(t, tr, call("t1", "transfer", transferArgs()), ev)
	if out.Envelope.OK || tr.State("t1") != orchestrator.StateCancelled || tr.Answer("t1") {
		t.Fatalf("transfer: %+v, state %s; want cancelled, never answered", out.Envelope, tr.State("t1"))
	}
	if f.runs("transfer") != 0 || len(ev.confirmations()) != 0 || told.Load() != 1 {
		t.Fatalf("runs %d, confirmations %d, told %d; want 0, 0, 1", f.runs("transfer"), len(ev.confirmations()), told.Load())
	}
	if p, err := r.store.Pending(t.Context(), stale.ID); err != nil || len(p) != 0 {
		t.Fatalf("pending %+v, %v; want nothing stored by the old owner", p, err)
	}
}
