package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/store"
)

// A typed turn refused at its first write (here: the user was blocked on
// another node since this connection last looked) is taken back in the
// store before the browser hears of the refusal: told first, a resume
// elsewhere before the undo landed (the user reloading at the news) would
// fence the undo out, and the message the user was told was refused would
// stay in the history the model reads on the new node.
func TestARefusedTurnIsTakenBackBeforeTheBrowserHearsOfIt(t *testing.T) {
	c := newCore(t, say("never asked"))
	cl, ready := c.start(nil)
	ctx := context.Background()
	if err := c.store.BlockUser(ctx, "u", store.Block{Until: time.Now().Add(time.Hour), Reason: "abuse"}); err != nil {
		t.Fatal(err)
	}
	release := c.store.stallUndos()
	defer release()
	cl.send(map[string]any{"type": "text", "text": "refused message"})
	testwait.For(t, "the refused turn's undo", func() bool { return c.store.undoWait.Load() == 1 })
	// A ping's pong is sent after whatever was sent before the undo began.
	cl.send(map[string]any{"type": "ping"})
	cl.next("pong")
	for _, ev := range cl.seen {
		if ev.Type == "blocked" || ev.Type == "error" {
			t.Fatalf("the browser heard of the refusal while its undo had not landed: %+v", cl.seen)
		}
	}
	release()
	if ev := cl.next("error"); ev.Code != "blocked" {
		t.Fatalf("error %+v, want blocked", ev)
	}
	_, hist, err := c.store.Store.(*store.RedisStore).Load(ctx, ready.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 0 {
		t.Fatalf("stored history %+v, want the refused message taken back", hist)
	}
	c.leave(cl)
}
