package gateway_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
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

	// A ping every 10 ms, none waiting for the one before: over the rate a
	// ping gets no pong. Each waits for its pong far longer than the test
	// runs (a short deadline would have the client library close its own
	// connection when writing a ping is slow on a busy machine); all end
	// when the connection does.
	var pings sync.WaitGroup
	defer pings.Wait()
	stop := make(chan struct{})
	defer close(stop)
	pings.Add(1)
	go func() {
		defer pings.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			pings.Add(1)
			go func() {
				defer pings.Done()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_ = c.c.Ping(ctx) // ends with the connection
			}()
		}
	}()
	limited := slices.ContainsFunc(c.eventsUntilClose("the ping flood", 4008),
		func(ev event) bool { return ev.str("code") == "rate_limited" })
	if !limited {
		t.Error("the ping flood was not told rate_limited before the close")
	}
	if n := g.refusals("message_rate"); n == 0 {
		t.Error("no ping counted in turnstile_refusals_total{reason=\"message_rate\"}")
	}
}
