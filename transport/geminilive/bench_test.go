package geminilive_test

import (
	"context"
	"encoding/base64"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/geminilive"
)

// The hot path of a voice session over a real loopback WebSocket: one
// 20 ms microphone chunk up, one model-audio chunk down. The SDK rows are
// the same work through genai's Session, for comparison. Allocations count
// the whole process, the upstream's side included (it reads and writes
// without allocating).

// drain is an upstream that completes the setup and reads everything.
func drain(ctx context.Context, c *websocket.Conn) {
	if setupComplete(ctx, c) != nil {
		return
	}
	buf := make([]byte, 64<<10)
	for {
		_, r, err := c.Reader(context.Background())
		if err != nil {
			return
		}
		for {
			if _, err := r.Read(buf); err != nil {
				break
			}
		}
	}
}

// speak is an upstream that completes the setup and then sends 20 ms of
// 24 kHz model audio (960 bytes) as fast as the client takes it.
func speak(ctx context.Context, c *websocket.Conn) {
	if setupComplete(ctx, c) != nil {
		return
	}
	msg := []byte(`{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"data":"` +
		base64.StdEncoding.EncodeToString(make([]byte, 960)) + `","mimeType":"audio/pcm;rate=24000"}}]}}}`)
	for c.Write(context.Background(), websocket.MessageBinary, msg) == nil {
	}
}

func BenchmarkSendAudio(b *testing.B) {
	rs := startRaw(b, drain)
	s := connect(b, newModel(b, rs.addr, geminilive.Options{}), transport.LiveConfig{})
	pcm := make([]byte, 640)
	b.SetBytes(int64(len(pcm)))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.SendAudio(pcm); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRecvModelAudio(b *testing.B) {
	rs := startRaw(b, speak)
	s := connect(b, newModel(b, rs.addr, geminilive.Options{}), transport.LiveConfig{})
	b.SetBytes(960)
	b.ReportAllocs()
	for b.Loop() {
		ev, err := s.Recv()
		if err != nil || ev.Kind != transport.LiveAudio || len(ev.Audio) != 960 {
			b.Fatalf("Recv = %+v, %v", ev, err)
		}
	}
	_ = s.Close()
}

// sdkSession opens the SDK's own Live session on the raw server.
func sdkSession(b *testing.B, addr string) *genai.Session {
	b.Helper()
	newModel(b, addr, geminilive.Options{}) // clears the SDK's env
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := genai.NewClient(ctx, &genai.ClientConfig{Backend: genai.BackendGeminiAPI, APIKey: "k",
		HTTPOptions: genai.HTTPOptions{BaseURL: "ws://" + addr + "/"}})
	if err != nil {
		b.Fatal(err)
	}
	s, err := c.Live.Connect(ctx, testModel, &genai.LiveConnectConfig{ResponseModalities: []genai.Modality{genai.ModalityAudio}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Receive(); err != nil { // the echoed setupComplete
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

func BenchmarkSDKSendAudio(b *testing.B) {
	rs := startRaw(b, drain)
	s := sdkSession(b, rs.addr)
	pcm := make([]byte, 640)
	b.SetBytes(int64(len(pcm)))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.SendRealtimeInput(genai.LiveRealtimeInput{Audio: &genai.Blob{MIMEType: "audio/pcm;rate=16000", Data: pcm}}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSDKReceiveModelAudio(b *testing.B) {
	rs := startRaw(b, speak)
	s := sdkSession(b, rs.addr)
	b.SetBytes(960)
	b.ReportAllocs()
	for b.Loop() {
		msg, err := s.Receive()
		if err != nil || msg.ServerContent == nil || len(msg.ServerContent.ModelTurn.Parts[0].InlineData.Data) != 960 {
			b.Fatalf("Receive = %+v, %v", msg, err)
		}
	}
	_ = s.Close()
}
