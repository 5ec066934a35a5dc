//go:build unix

package geminilive_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/geminilive"
)

// The lean wait (wsbuf.Client.Wait on the socket itself) is unix-only:
// elsewhere, as over TLS, the session waits inside the frame-header read.

// A session waiting for its next message (most of a voice session's life)
// waits on its receiver's own stack, not inside a
// frame-header read, and holds no buffer there.
func TestSessionWaitsForItsNextMessageOutsideTheLibrary(t *testing.T) {
	next := make(chan struct{})
	rs := startRaw(t, func(ctx context.Context, c *websocket.Conn) {
		if setupComplete(ctx, c) != nil {
			return
		}
		select {
		case <-next:
		case <-ctx.Done():
			return
		}
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"serverContent":{"outputTranscription":{"text":"hi"}}}`))
		<-ctx.Done()
	})
	s := connect(t, newModel(t, rs.addr, geminilive.Options{}), transport.LiveConfig{})
	got := make(chan transport.LiveEvent, 1)
	go func() {
		ev, _ := s.Recv()
		got <- ev
	}()
	testwait.ForNil(t, "Recv to wait for the next message", func() error {
		st := testwait.StackWith("geminilive.(*Session).Recv")
		if !strings.Contains(st, "wsbuf.(*Client).Wait") {
			return fmt.Errorf("its stack:\n%s", st)
		}
		if strings.Contains(st, "gobwas/ws") || strings.Contains(st, "(*Client).Next") {
			t.Fatalf("Recv waits inside a frame-header read:\n%s", st)
		}
		return nil
	})
	if read, held := geminilive.HeldBuffers(s); read || held {
		t.Errorf("waiting: holds read buffer %v, audio %v; want neither", read, held)
	}
	close(next)
	if ev := <-got; ev.Kind != transport.LiveOutputTranscript || ev.Text != "hi" {
		t.Fatalf("Recv = %+v; want the transcript", ev)
	}
}
