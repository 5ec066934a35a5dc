package geminilive_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/geminilive"
)

// A voice session waits for its next message most of its life; at that
// point it must hold no message buffer of its own (they are pooled), and
// the model audio it returned stays valid only until the next Recv.
func TestSessionHoldsNoBufferBetweenMessages(t *testing.T) {
	pcm := make([]byte, 960)
	for i := range pcm {
		pcm[i] = byte(i)
	}
	audio := `{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"mimeType":"audio/pcm;rate=24000","data":"` +
		base64.StdEncoding.EncodeToString(pcm) + `"}}]}}}`
	rs := startRaw(t, func(ctx context.Context, c *websocket.Conn) {
		if setupComplete(ctx, c) != nil {
			return
		}
		for _, m := range []string{audio, `{"serverContent":{"outputTranscription":{"text":"hi"}}}`} {
			if c.Write(ctx, websocket.MessageText, []byte(m)) != nil {
				return
			}
		}
		<-ctx.Done()
	})
	s := connect(t, newModel(t, rs.addr, geminilive.Options{}), transport.LiveConfig{})
	if read, held := geminilive.HeldBuffers(s); read || held {
		t.Fatalf("after connecting: holds read buffer %v, audio %v; want neither", read, held)
	}
	ev, err := s.Recv()
	if err != nil || ev.Kind != transport.LiveAudio || string(ev.Audio) != string(pcm) {
		t.Fatalf("Recv = %v %d bytes, %v; want the model audio", ev.Kind, len(ev.Audio), err)
	}
	if read, held := geminilive.HeldBuffers(s); read || !held {
		t.Fatalf("with model audio returned: holds read buffer %v, audio %v; want only the audio", read, held)
	}
	if ev, err = s.Recv(); err != nil || ev.Kind != transport.LiveOutputTranscript || ev.Text != "hi" {
		t.Fatalf("Recv = %+v, %v; want the transcript", ev, err)
	}
	if read, held := geminilive.HeldBuffers(s); read || held {
		t.Errorf("after a message without audio: holds read buffer %v, audio %v; want neither", read, held)
	}
}

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
