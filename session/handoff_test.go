package session_test

import (
	"testing"

	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// The browser hears handoff only once the hand-off is stored: told first,
// a resume elsewhere before the write landed (the user reloading at the
// news) would fence the write out, and the conversation the user was told
// a person has would go on with the model.
func TestHandoffIsStoredBeforeTheBrowserHearsIt(t *testing.T) {
	c := newCore(t, callTool("call-1", "hand_over", map[string]any{}), say("A person will take it from here."))
	release := c.store.stallHandOffs()
	defer release()
	cl, ready := c.start(nil)
	cl.send(map[string]any{"type": "text", "text": "I want to talk to a person"})
	testwait.For(t, "the hand-off's store write", func() bool { return c.store.handWait.Load() == 1 })
	// A ping's pong is sent after whatever was sent before the write began.
	cl.send(map[string]any{"type": "ping"})
	cl.next("pong")
	for _, ev := range cl.seen {
		if ev.Type == "handoff" {
			t.Fatalf("the browser heard handoff while the hand-off's write had not landed: %+v", cl.seen)
		}
	}
	release()
	cl.next("handoff")
	if ev := cl.next("turn.done"); ev.Turn != 1 {
		t.Fatalf("turn.done %+v, want turn 1", ev)
	}
	c.leave(cl)

	// Resumed, the session is with the person: what the user types is held.
	again, resumed := c.start(&ready)
	if !resumed.Resumed {
		t.Fatalf("resume: %+v", resumed)
	}
	again.send(map[string]any{"type": "text", "text": "hello?"})
	again.next("handoff.pending")
	if n := len(c.model.requests()); n != 2 {
		t.Errorf("%d model requests, want the turn's 2: nothing typed after the hand-off reached the model", n)
	}
}
