package session_test

import (
	"context"
	"testing"

	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/protocol"
)

// The session without its connection: driven through its inputs, read
// through a fake outbound (session.Outbox), with the real store on
// miniredis. No WebSocket, no reader, no writer.

func TestSessionWithoutAConnectionAnswersATypedTurnAndStoresIt(t *testing.T) {
	c := newCore(t, say("Hello, how can I help?"))
	s, out, cl := c.open(nil)
	ready := cl.next("session.ready")
	if ready.SessionID == "" || ready.ResumeToken == "" {
		t.Fatalf("session.ready %+v, want a new session with a resume token", ready)
	}
	s.Input(protocol.ClientMessage{Type: protocol.TypeText, Text: "hi"})
	if ev := cl.next("turn.start"); ev.Turn != 1 || ev.Text != "hi" {
		t.Errorf("turn.start %+v, want turn 1 with the user's text", ev)
	}
	if ev := cl.next("text.done"); ev.Text != "Hello, how can I help?" {
		t.Errorf("text.done %+v, want the model's answer", ev)
	}
	if ev := cl.next("turn.done"); ev.Turn != 1 || ev.Reason != "end_turn" {
		t.Errorf("turn.done %+v, want turn 1 ended end_turn", ev)
	}
	s.End()
	if d, closed := out.Closed(); closed {
		t.Errorf("the session closed its connection (%s) on its own", d.Label)
	}

	// The store has the turn, for a resume on any node.
	rec, hist, err := c.store.Resume(context.Background(), ready.SessionID, ready.ResumeToken, "u")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Turn != 1 || len(hist) != 2 || hist[0].Text != "hi" || hist[1].Text != "Hello, how can I help?" {
		t.Errorf("stored turn %d, history %+v; want turn 1 with its question and answer", rec.Turn, hist)
	}
}

func TestSessionTheStoreCannotStartClosesItsConnectionStoreUnavailable(t *testing.T) {
	c := newCore(t, say("never asked"))
	c.store.fail.Store(true)
	s, out, cl := c.open(nil)
	if ev := cl.next("error"); ev.Code != "store_unavailable" {
		t.Fatalf("error %+v, want store_unavailable", ev)
	}
	testwait.For(t, "the session to close its connection", func() bool { _, ok := out.Closed(); return ok })
	if d, _ := out.Closed(); d != protocol.DisconnectStoreUnavailable {
		t.Errorf("closed %s (%d), want store_unavailable (4103)", d.Label, d.Code)
	}
	s.Input(protocol.ClientMessage{Type: protocol.TypeText, Text: "hi"})
	s.End()
	if n := len(c.model.requests()); n != 0 {
		t.Errorf("%d model requests from a session that never started", n)
	}
}

func TestSessionResumedOnTheSameNodeClosesTheOldOneTakenOver(t *testing.T) {
	c := newCore(t, say("first answer"))
	old, oldOut, oldCl := c.open(nil)
	ready := oldCl.next("session.ready")
	old.Input(protocol.ClientMessage{Type: protocol.TypeText, Text: "one"})
	oldCl.next("turn.done")

	_, out, cl := c.open(&ready)
	again := cl.next("session.ready")
	if !again.Resumed || again.SessionID != ready.SessionID || again.Turn != 1 || len(again.History) != 2 {
		t.Fatalf("resume: session.ready %+v, want session %s resumed at turn 1 with its history", again, ready.SessionID)
	}
	if d, ok := oldOut.Closed(); !ok || d != protocol.DisconnectTakenOver {
		t.Errorf("the old session closed %v (%s), want taken_over (4005)", ok, d.Label)
	}
	select {
	case <-oldOut.Ended():
	default:
		t.Error("the resume went on before the old session had ended (its writes landed)")
	}
	if _, closed := out.Closed(); closed {
		t.Error("the resuming session closed")
	}
}

func TestSessionConfirmationLeftUnansweredWaitsForTheResumedSession(t *testing.T) {
	c := newCore(t, callTool("call-1", "transfer", map[string]any{"to": "bob"}), say("Please approve."))
	first, _, cl := c.open(nil)
	ready := cl.next("session.ready")
	first.Input(protocol.ClientMessage{Type: protocol.TypeText, Text: "pay bob"})
	req := cl.next("confirm.request")
	cl.next("turn.done")
	first.End()

	again, _, cl2 := c.open(&ready)
	resumed := cl2.next("session.ready")
	if p := resumed.PendingConfirmations; len(p) != 1 || p[0].Token != req.Token || p[0].Tool != "transfer" {
		t.Fatalf("resumed pendingConfirmations %+v, want the transfer waiting (%s)", p, req.Token)
	}
	again.Input(protocol.ClientMessage{Type: protocol.TypeConfirm, Token: req.Token, Approve: false})
	if ev := cl2.next("confirm.done"); ev.Outcome != "denied" || ev.Token != req.Token {
		t.Errorf("confirm.done %+v, want %s denied", ev, req.Token)
	}
	if c.transfers.Load() != 0 {
		t.Error("transfer ran after a denial")
	}
}
