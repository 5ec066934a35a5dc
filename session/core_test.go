package session_test

import (
	"strings"
	"testing"

	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/transport"
)

func TestTypedTurnIsAnsweredAndKeptForTheResume(t *testing.T) {
	c := newCore(t, say("Hello, how can I help?"))
	cl, ready := c.start(nil)
	if ready.SessionID == "" || ready.ResumeToken == "" || ready.Resumed {
		t.Fatalf("session.ready %+v, want a new session with a resume token", ready)
	}
	cl.send(map[string]any{"type": "text", "text": "hi"})
	if ev := cl.next("turn.start"); ev.Turn != 1 || ev.Text != "hi" {
		t.Errorf("turn.start %+v, want turn 1 with the user's text", ev)
	}
	if ev := cl.next("text.done"); ev.Text != "Hello, how can I help?" {
		t.Errorf("text.done %+v, want the model's answer", ev)
	}
	if ev := cl.next("turn.done"); ev.Turn != 1 || ev.Reason != "end_turn" {
		t.Errorf("turn.done %+v, want turn 1 ended end_turn", ev)
	}
	c.leave(cl)

	_, again := c.start(&ready)
	if !again.Resumed || again.SessionID != ready.SessionID || again.Turn != 1 {
		t.Fatalf("resume: session.ready %+v, want session %s resumed at turn 1", again, ready.SessionID)
	}
	if h := again.History; len(h) != 2 || h[0].Role != "user" || h[0].Text != "hi" || h[1].Text != "Hello, how can I help?" {
		t.Errorf("resumed history %+v, want the turn's question and answer", h)
	}
}

func TestTextWhileATurnRunsIsRefusedAndTheNextOneIsTaken(t *testing.T) {
	c := newCore(t, say("first answer"), say("second answer"))
	c.model.hold = make(chan struct{})
	cl, _ := c.start(nil)
	cl.send(map[string]any{"type": "text", "text": "one"})
	cl.next("turn.start")
	cl.send(map[string]any{"type": "text", "text": "two"})
	if ev := cl.next("error"); ev.Code != "turn_in_progress" {
		t.Fatalf("error %+v, want turn_in_progress while turn 1 runs", ev)
	}
	close(c.model.hold)
	if ev := cl.next("turn.done"); ev.Turn != 1 {
		t.Fatalf("turn.done %+v, want turn 1", ev)
	}
	cl.send(map[string]any{"type": "text", "text": "three"})
	if ev := cl.next("text.done"); ev.Text != "second answer" {
		t.Errorf("text.done %+v, want the second answer", ev)
	}
	if n := len(c.model.requests()); n != 2 {
		t.Errorf("%d model requests, want 2: the refused text never reached the model", n)
	}
}

func TestApprovedConfirmationTellsTheModelInATurnOfItsOwnAndTheCallRuns(t *testing.T) {
	args := map[string]any{"to": "alice"}
	c := newCore(t, callTool("call-1", "transfer", args), say("I asked you to approve it."),
		callTool("call-2", "transfer", args), say("Done: sent to alice."))
	cl, _ := c.start(nil)
	cl.send(map[string]any{"type": "text", "text": "send money to alice"})
	req := cl.next("confirm.request")
	if req.Token == "" || req.Tool != "transfer" {
		t.Fatalf("confirm.request %+v, want a token for transfer", req)
	}
	cl.next("turn.done")
	if c.transfers.Load() != 0 {
		t.Fatal("transfer ran before the user approved it")
	}

	cl.send(map[string]any{"type": "confirm", "token": req.Token, "approve": true})
	if ev := cl.next("confirm.done"); ev.Token != req.Token || ev.Outcome != "approved" || ev.Tool != "transfer" {
		t.Fatalf("confirm.done %+v, want transfer approved", ev)
	}
	if ev := cl.next("turn.start"); ev.Turn != 2 || ev.Kind != "confirmation" {
		t.Fatalf("turn.start %+v, want turn 2 of kind confirmation", ev)
	}
	if ev := cl.next("text.done"); ev.Text != "Done: sent to alice." {
		t.Errorf("text.done %+v, want the model's answer after the call", ev)
	}
	if n := c.transfers.Load(); n != 1 {
		t.Errorf("transfer ran %d times, want once", n)
	}
	reqs := c.model.requests()
	told := reqs[2].History[len(reqs[2].History)-1]
	if told.Role != transport.RoleUser || !strings.Contains(told.Text, "approved your pending call to transfer") {
		t.Errorf("the model was told %+v, want the approval", told)
	}

	// Answered once: the same token again is unknown.
	cl.send(map[string]any{"type": "confirm", "token": req.Token, "approve": true})
	if ev := cl.next("error"); ev.Code != "confirmation_unknown" {
		t.Errorf("second answer: %+v, want confirmation_unknown", ev)
	}
}

func TestResumeShowsTheConfirmationStillWaiting(t *testing.T) {
	c := newCore(t, callTool("call-1", "transfer", map[string]any{"to": "bob"}), say("Please approve."))
	cl, ready := c.start(nil)
	cl.send(map[string]any{"type": "text", "text": "pay bob"})
	req := cl.next("confirm.request")
	cl.next("turn.done")
	c.leave(cl)

	cl2, again := c.start(&ready)
	if p := again.PendingConfirmations; len(p) != 1 || p[0].Token != req.Token || p[0].Tool != "transfer" {
		t.Fatalf("resumed pendingConfirmations %+v, want the transfer waiting (%s)", p, req.Token)
	}
	cl2.send(map[string]any{"type": "confirm", "token": req.Token, "approve": false})
	if ev := cl2.next("confirm.done"); ev.Outcome != "denied" {
		t.Errorf("confirm.done %+v, want denied", ev)
	}
	if c.transfers.Load() != 0 {
		t.Error("transfer ran after a denial")
	}
}

func TestSecondSessionStartIsAProtocolViolation(t *testing.T) {
	c := newCore(t)
	cl, _ := c.start(nil)
	cl.send(map[string]any{"type": "session.start"})
	if ev := cl.next("error"); ev.Code != "bad_message" {
		t.Errorf("error %+v, want bad_message", ev)
	}
	testwait.For(t, "the connection to close", func() bool { return cl.w.code.Load() != 0 })
	if code := cl.w.code.Load(); code != 4002 {
		t.Errorf("closed with %d, want 4002 (protocol violation)", code)
	}
}

func TestPingIsAnsweredWhileATypedTurnWaitsForTheStore(t *testing.T) {
	c := newCore(t, say("answered after the store"))
	cl, _ := c.start(nil)
	release := c.store.stall()
	cl.send(map[string]any{"type": "text", "text": "hi"})
	testwait.For(t, "the turn's first write to wait on the store", func() bool { return c.store.waiting.Load() == 1 })
	// The connection's reader does not wait for Redis: it reads and
	// answers the ping while the turn's write is held back.
	cl.send(map[string]any{"type": "ping"})
	cl.next("pong")
	for _, ev := range cl.seen {
		if ev.Type == "turn.start" {
			t.Fatalf("turn.start before the store answered: %+v", cl.seen)
		}
	}
	release()
	if ev := cl.next("text.done"); ev.Text != "answered after the store" {
		t.Errorf("text.done %+v, want the answer", ev)
	}
}

func TestPingIsAnsweredWhileSessionStartWaitsForTheStore(t *testing.T) {
	c := newCore(t, say("answered after the start"))
	release := c.store.stall()
	cl := c.connect()
	cl.send(map[string]any{"type": "session.start"})
	testwait.For(t, "the session's record to wait on the store", func() bool { return c.store.waiting.Load() == 1 })
	// The reader does not start the session itself: it reads and answers
	// the ping while the store holds the start back.
	cl.send(map[string]any{"type": "ping"})
	cl.next("pong")
	// Typed text read before session.ready waits for the start, as it did.
	cl.send(map[string]any{"type": "text", "text": "hi"})
	cl.send(map[string]any{"type": "ping"})
	cl.next("pong")
	for _, ev := range cl.seen {
		if ev.Type != "pong" {
			t.Fatalf("%s before the store answered: %+v", ev.Type, cl.seen)
		}
	}
	release()
	if ready := cl.next("session.ready"); ready.SessionID == "" {
		t.Fatalf("session.ready %+v, want the new session", ready)
	}
	if ev := cl.next("turn.start"); ev.Turn != 1 || ev.Text != "hi" {
		t.Errorf("turn.start %+v, want the text sent before session.ready as turn 1", ev)
	}
	if ev := cl.next("text.done"); ev.Text != "answered after the start" {
		t.Errorf("text.done %+v, want the answer", ev)
	}
}

func TestSessionStartRefusedByTheStoreDropsWhatWasSentAfterIt(t *testing.T) {
	c := newCore(t, say("never asked"))
	release := c.store.stall()
	defer release()
	cl := c.connect()
	cl.send(map[string]any{"type": "session.start"})
	testwait.For(t, "the session's record to wait on the store", func() bool { return c.store.waiting.Load() == 1 })
	cl.send(map[string]any{"type": "text", "text": "hi"})
	cl.send(map[string]any{"type": "ping"})
	cl.next("pong") // the text is read, and waits for the start
	c.store.fail.Store(true)
	release()
	if ev := cl.next("error"); ev.Code != "store_unavailable" {
		t.Fatalf("error %+v, want store_unavailable", ev)
	}
	testwait.For(t, "the connection to close", func() bool { return cl.w.code.Load() != 0 })
	if code := cl.w.code.Load(); code != 4103 {
		t.Errorf("closed with %d, want 4103 (store unavailable)", code)
	}
	c.leave(cl)
	if n := len(c.model.requests()); n != 0 {
		t.Errorf("%d model requests: the text sent after a refused session.start was acted on", n)
	}
}

func TestTurnCancelSentRightAfterTheTextCancelsThatTurn(t *testing.T) {
	c := newCore(t, say("never shown"), say("the next answer"))
	c.model.hold = make(chan struct{}) // the model answers nothing until cancelled
	cl, _ := c.start(nil)
	// Back to back: the inputs are acted on in the order they came, so the
	// cancel finds the turn the text started.
	cl.send(map[string]any{"type": "text", "text": "one"})
	cl.send(map[string]any{"type": "turn.cancel"})
	if ev := cl.next("turn.done"); ev.Turn != 1 || ev.Reason != "interrupted" {
		t.Fatalf("turn.done %+v, want turn 1 interrupted", ev)
	}
	for _, ev := range cl.seen {
		if ev.Type == "text.done" {
			t.Fatalf("the cancelled turn answered: %+v", cl.seen)
		}
	}
	close(c.model.hold)
	cl.send(map[string]any{"type": "text", "text": "two"})
	if ev := cl.next("text.done"); ev.Text != "the next answer" {
		t.Errorf("text.done %+v, want the next turn answered", ev)
	}
}
