package geminilive_test

import (
	"context"
	"encoding/base64"
	"testing"

	"github.com/coder/websocket"

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
