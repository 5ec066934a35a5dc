package geminilive_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/geminilive"
)

func TestFullSendQueueFailsFastWithBackpressure(t *testing.T) {
	before := goleak.IgnoreCurrent()
	// The upstream completes the setup and then never reads again, so
	// socket buffers fill, the sender blocks in its write, and the queue
	// fills behind it.
	rs := startRaw(t, func(ctx context.Context, c *websocket.Conn) {
		if setupComplete(ctx, c) == nil {
			<-ctx.Done()
		}
	})
	m := newModel(t, rs.addr, geminilive.Options{SendQueue: 4})
	s := connect(t, m, transport.LiveConfig{})

	// A sender that is merely slower than this loop also fills the queue
	// for a moment; a stalled upstream keeps it full for good.
	chunk := make([]byte, 64<<10)
	deadline := time.Now().Add(20 * time.Second)
	var fullSince time.Time
	for time.Since(fullSince) < 300*time.Millisecond || fullSince.IsZero() {
		if time.Now().After(deadline) {
			t.Fatal("the send queue never stayed full behind a stalled upstream")
		}
		begin := time.Now()
		err := s.SendAudio(chunk)
		if d := time.Since(begin); d > 100*time.Millisecond {
			t.Fatalf("SendAudio blocked for %v; it must never wait for the upstream", d)
		}
		switch {
		case err == nil:
			fullSince = time.Time{}
		case errors.Is(err, transport.ErrBackpressure):
			if fullSince.IsZero() {
				fullSince = begin
			}
			time.Sleep(20 * time.Millisecond)
		default:
			t.Fatalf("SendAudio = %v, want nil or ErrBackpressure", err)
		}
	}

	// Close must not hang on the sender stuck in its write.
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hung while the sender was blocked on a stalled upstream")
	}
	if err := s.SendAudio(chunk); !errors.Is(err, geminilive.ErrClosed) {
		t.Errorf("SendAudio after Close = %v, want ErrClosed", err)
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err after Close = %v, want nil", err)
	}
	rs.stop()
	noLeak(t, before)
}
