package main

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/transport/fakegemini"
)

// WebSocket ping frames count toward the message rate: a flood of them is
// told rate_limited, counted as message_rate and closed 4008, as a flood
// of text messages is (4.2 M unanswerable-by-any-limit pings in 21 s was
// issue 24's finding).
func TestPingFrameFloodHitsTheMessageRateAndIsClosedWith4008(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.MessageRate, cfg.MessageBurst, cfg.RateAbuseAfter = 2, 3, time.Second
	g := startGateway(t, cfg, fakegemini.NewScript())
	c := g.dial("", nil)
	c.start(nil)

	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Over the rate a ping gets no pong: each waits a little, then
			// the next goes.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			err := c.c.Ping(ctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				return // the connection ended
			}
		}
	}()
	limited := false
	for {
		ev, err := c.read()
		if err != nil {
			if code := websocket.CloseStatus(err); code != 4008 {
				t.Fatalf("ping flood ended with %v (close %d), want close 4008", err, code)
			}
			break
		}
		if ev.str("code") == "rate_limited" {
			limited = true
		}
	}
	if !limited {
		t.Error("the ping flood was not told rate_limited before the close")
	}
	if n := g.refusals("message_rate"); n == 0 {
		t.Error("no ping counted in turnstile_refusals_total{reason=\"message_rate\"}")
	}
}
