//go:build linux

package geminilive_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/internal/evloop"
	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/geminilive"
)

func audioMsg(pcm string, flags string) string {
	return `{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"mimeType":"audio/pcm;rate=24000","data":"` +
		base64.StdEncoding.EncodeToString([]byte(pcm)) + `"}}]}` + flags + `}}`
}

// sinkLog is an AudioSink that records what it took, in one log with
// what Recv returned.
type sinkLog struct {
	mu    sync.Mutex
	log   []string
	ready bool
}

func (s *sinkLog) add(e string) {
	s.mu.Lock()
	s.log = append(s.log, e)
	s.mu.Unlock()
}

func (s *sinkLog) Ready() bool      { s.mu.Lock(); defer s.mu.Unlock(); return s.ready }
func (s *sinkLog) Audio(pcm []byte) { s.add("sink:" + string(pcm)) }

// On an event loop, messages of model audio alone go to the session's
// audio sink where they are read; a transcript, audio with a flag, and
// everything while the sink is not ready come through Recv — all in the
// order the upstream sent them. Sends still reach the upstream. Over
// ws://, and over wss:// (production's TLS to Google, fed by the loop).
func TestASessionOnALoopHandsAudioAloneToItsSinkInOrderWithRecv(t *testing.T) {
	for _, scheme := range []string{"ws", "wss"} {
		t.Run(scheme, func(t *testing.T) { sessionOnALoopHandsAudioToItsSink(t, scheme == "wss") })
	}
}

func sessionOnALoopHandsAudioToItsSink(t *testing.T, overTLS bool) {
	pool, err := evloop.NewPool(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	heard := make(chan string, 1)
	rs := startRawOver(t, overTLS, func(ctx context.Context, c *websocket.Conn) {
		if setupComplete(ctx, c) != nil {
			return
		}
		for _, m := range []string{audioMsg("A1", ""), audioMsg("A2", ""),
			`{"serverContent":{"outputTranscription":{"text":"hi"}}}`,
			audioMsg("A3", `,"turnComplete":true`), audioMsg("A4", "")} {
			if c.Write(ctx, websocket.MessageText, []byte(m)) != nil {
				return
			}
		}
		_, mic, err := c.Read(ctx)
		if err != nil {
			return
		}
		heard <- string(mic)
		_ = c.Write(ctx, websocket.MessageText, []byte(audioMsg("A5", "")))
		_ = c.Close(websocket.StatusNormalClosure, "done")
	})
	var m *geminilive.Model
	if overTLS {
		m = geminilive.New(newClientOver(t, "wss", rs.addr), testModel, geminilive.Options{Loops: pool})
		roots := x509.NewCertPool()
		roots.AddCert(rs.srv.Certificate())
		geminilive.SetTLSConfig(m, &tls.Config{RootCAs: roots})
	} else {
		m = newModel(t, rs.addr, geminilive.Options{Loops: pool})
	}
	s := connect(t, m, transport.LiveConfig{})
	lf, ok := s.(transport.LiveFast)
	if !ok || lf.SendsWait() {
		t.Fatal("a session on a loop is not a LiveFast whose sends never wait")
	}
	sink := &sinkLog{ready: true}
	if !lf.SetAudioSink(sink) {
		t.Fatal("SetAudioSink refused on a loop")
	}
	if err := s.SendAudio([]byte("mic")); err != nil {
		t.Fatal(err)
	}
	var rerr error
	for {
		ev, err := s.Recv()
		if err != nil {
			rerr = err
			break
		}
		switch ev.Kind {
		case transport.LiveAudio:
			sink.add("recv:" + string(ev.Audio))
			if string(ev.Audio) == "A4" {
				sink.mu.Lock()
				sink.ready = true
				sink.mu.Unlock()
			}
		case transport.LiveOutputTranscript:
			sink.add("recv:transcript:" + ev.Text)
			sink.mu.Lock()
			sink.ready = false // what follows waits for Recv until ready again
			sink.mu.Unlock()
		case transport.LiveTurnComplete:
			sink.add("recv:turnComplete")
		}
	}
	var ce *transport.CloseError
	if !errors.As(rerr, &ce) || ce.Code != 1000 {
		t.Fatalf("Recv ended with %v; want the upstream's close", rerr)
	}
	want := []string{"sink:A1", "sink:A2", "recv:transcript:hi", "recv:A3", "recv:turnComplete", "recv:A4", "sink:A5"}
	if !slices.Equal(sink.log, want) {
		t.Fatalf("got %q; want %q", sink.log, want)
	}
	if h := <-heard; h != `{"realtimeInput":{"audio":{"data":"`+base64.StdEncoding.EncodeToString([]byte("mic"))+`","mimeType":"audio/pcm;rate=16000"}}}` {
		t.Fatalf("the upstream heard %s", h)
	}
}
