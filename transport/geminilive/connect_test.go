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

func TestConnectGivesUpWhenSetupNeverCompletes(t *testing.T) {
	before := goleak.IgnoreCurrent()
	rs := startRaw(t, func(ctx context.Context, c *websocket.Conn) { <-ctx.Done() })
	m := newModel(t, rs.addr, geminilive.Options{ConnectTimeout: 150 * time.Millisecond})

	begin := time.Now()
	s, err := m.Connect(context.Background(), transport.LiveConfig{System: "hi"})
	elapsed := time.Since(begin)
	if !errors.Is(err, geminilive.ErrConnectTimeout) {
		t.Fatalf("Connect = (%v, %v), want ErrConnectTimeout", s, err)
	}
	if elapsed > 2*time.Second {
		t.Errorf("Connect took %v with a 150ms timeout", elapsed)
	}
	rs.stop()
	noLeak(t, before)
}

func TestConnectHonoursContextCancellation(t *testing.T) {
	before := goleak.IgnoreCurrent()
	rs := startRaw(t, func(ctx context.Context, c *websocket.Conn) { <-ctx.Done() })
	m := newModel(t, rs.addr, geminilive.Options{ConnectTimeout: time.Minute})

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err := m.Connect(ctx, transport.LiveConfig{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Connect err = %v, want the context's deadline", err)
	}
	if elapsed := time.Since(begin); elapsed > 2*time.Second {
		t.Errorf("Connect took %v after its context ended", elapsed)
	}
	rs.stop()
	noLeak(t, before)
}

func TestConnectThatTimedOutHasDroppedTheConnection(t *testing.T) {
	release := make(chan struct{})
	upstreamSaw := make(chan error, 1)
	before := goleak.IgnoreCurrent()
	rs := startRaw(t, func(ctx context.Context, c *websocket.Conn) {
		select {
		case <-release:
		case <-ctx.Done():
			return
		}
		if err := setupComplete(ctx, c); err != nil {
			upstreamSaw <- err
			return
		}
		// The adapter gave up: the connection is gone, and no setup reply
		// or anything after it reaches a session.
		_, _, err := c.Read(ctx)
		upstreamSaw <- err
	})
	m := newModel(t, rs.addr, geminilive.Options{ConnectTimeout: 100 * time.Millisecond})

	if _, err := m.Connect(context.Background(), transport.LiveConfig{}); !errors.Is(err, geminilive.ErrConnectTimeout) {
		t.Fatalf("Connect err = %v, want ErrConnectTimeout", err)
	}
	close(release)
	select {
	case err := <-upstreamSaw:
		if websocket.CloseStatus(err) != -1 && websocket.CloseStatus(err) != websocket.StatusAbnormalClosure {
			t.Errorf("upstream read ended with %v, want the connection dropped", err)
		}
		if err == nil {
			t.Error("upstream read a message from an abandoned session")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the connection of a Connect that timed out is still open")
	}
	rs.stop()
	noLeak(t, before)
}

// noLeak fails the test if goroutines other than those running at before
// are still alive (goleak retries for a while before it gives up).
func noLeak(t *testing.T, before goleak.Option) {
	t.Helper()
	if err := goleak.Find(append([]goleak.Option{before}, leakIgnores...)...); err != nil {
		t.Error(err)
	}
}
