package geminilive_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/geminilive"
)

// modelAudio is a message of model audio whose data is b64, as written.
func modelAudio(b64 string) []byte {
	return []byte(`{"serverContent":{"modelTurn":{"role":"model","parts":[{"inlineData":{"mimeType":"audio/pcm;rate=24000","data":"` +
		b64 + `"}}]}}}`)
}

// speakOnce is an upstream that completes the setup, sends msg and then a
// turnComplete, and waits.
func speakOnce(t *testing.T, msg []byte) *rawServer {
	return startRaw(t, func(ctx context.Context, c *websocket.Conn) {
		if setupComplete(ctx, c) != nil {
			return
		}
		if c.Write(ctx, websocket.MessageText, msg) != nil {
			return
		}
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"serverContent":{"turnComplete":true}}`))
		<-ctx.Done()
	})
}

// twentyMs is 20 ms of 24 kHz model audio whose base64 has every
// character of the alphabet, '+' and '/' included.
func twentyMs() ([]byte, string) {
	pcm := make([]byte, 960)
	for i := range pcm {
		pcm[i] = byte(i*37 + i/256)
	}
	b64 := base64.StdEncoding.EncodeToString(pcm)
	if !strings.Contains(b64, "+") || !strings.Contains(b64, "/") {
		panic("twentyMs: no '+' or '/' in the base64")
	}
	return pcm, b64
}

// TestModelAudioWithJSONEscapesInItsBase64IsStillAudio: the data string
// of model audio may carry JSON escapes (an escaped solidus, a \u escape,
// escaped line breaks every 76 characters as MIME writes base64); the
// fast path leaves such a message to the full decoding, which unescapes
// and decodes it (skipping the line breaks, as encoding/base64 does). The
// browser gets the audio either way.
func TestModelAudioWithJSONEscapesInItsBase64IsStillAudio(t *testing.T) {
	pcm, b64 := twentyMs()
	var mime strings.Builder
	for i := 0; i < len(b64); i += 76 {
		mime.WriteString(b64[i:min(i+76, len(b64))])
		mime.WriteString(`\r\n`)
	}
	for name, data := range map[string]string{
		"plain":             b64,
		"escaped solidus":   strings.ReplaceAll(b64, "/", `\/`),
		"a \\u escape":      `\u0041` + b64[1:],
		"escaped newlines":  strings.ReplaceAll(mime.String(), `\r\n`, `\n`),
		"escaped CR LF":     mime.String(),
		"an escape at last": b64[:len(b64)-1] + fmt.Sprintf(`\u%04x`, b64[len(b64)-1]),
	} {
		t.Run(name, func(t *testing.T) {
			want := pcm
			if name == "a \\u escape" {
				want, _ = base64.StdEncoding.DecodeString("A" + b64[1:])
			}
			rs := speakOnce(t, modelAudio(data))
			s := connect(t, newModel(t, rs.addr, geminilive.Options{}), transport.LiveConfig{})
			r := receive(t, s)
			if ev := nextEvent(t, r); ev.Kind != transport.LiveAudio || !bytes.Equal(ev.Audio, want) {
				t.Fatalf("first event = %v with %d bytes of audio, want the 960 bytes of audio sent", ev.Kind, len(ev.Audio))
			}
			if ev := nextEvent(t, r); ev.Kind != transport.LiveTurnComplete {
				t.Fatalf("second event = %+v, want turnComplete", ev)
			}
		})
	}
}

// TestCorruptModelAudioEndsTheSession: model audio whose base64 is
// corrupt — at its start, inside and at the end of the part a vector
// decoder takes, in its tail, padding in its middle, a length that is
// not a multiple of four, the URL alphabet, an escaped tab — gives no
// audio and ends the session with an error about the message, as the SDK
// path always did.
func TestCorruptModelAudioEndsTheSession(t *testing.T) {
	_, b64 := twentyMs()
	at := func(i int, s string) string { return b64[:i] + s + b64[i+1:] }
	for name, data := range map[string]string{
		"a bad byte first":        at(0, "*"),
		"a bad byte at 100":       at(100, "*"),
		"a bad byte at 1247":      at(1247, "."),
		"a bad byte at 1275":      at(1275, "*"),
		"padding in the middle":   at(640, "="),
		"one character short":     b64[:len(b64)-1],
		"one character long":      b64 + "A",
		"the URL alphabet":        strings.ReplaceAll(b64, "+", "-"),
		"an escaped tab":          at(700, `\t`),
		"an escaped space at 40":  at(40, `\u0020`),
		"a non-ASCII byte at 500": at(500, "é"),
	} {
		t.Run(name, func(t *testing.T) {
			rs := speakOnce(t, modelAudio(data))
			s := connect(t, newModel(t, rs.addr, geminilive.Options{}), transport.LiveConfig{})
			evs, err := waitEnd(t, receive(t, s))
			if len(evs) != 0 {
				t.Errorf("events = %+v, want none: the bad message ends the session before the turnComplete", evs)
			}
			var ce *transport.CloseError
			if err == nil || errors.As(err, &ce) || errors.Is(err, transport.ErrSessionClosed) || !strings.Contains(err.Error(), "invalid message") {
				t.Fatalf("Recv = %v, want an error about the message", err)
			}
			if err := s.SendAudioEnd(); !errors.Is(err, geminilive.ErrEnded) {
				t.Errorf("send after the bad message = %v, want ErrEnded", err)
			}
		})
	}
}
