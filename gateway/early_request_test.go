package gateway_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/redistest"
)

// TestRefusedTurnsShowNothingAndCostOneCancelledModelRequestPerRun: a typed
// turn's model request starts alongside its first Redis write (which counts
// the turn and checks the user's storage quota), and waits for its verdict.
// A turn the store refuses shows the browser only the refusal — no
// turn.start, no delta — and its early request is cancelled; the turns after
// a refusal ask Redis first, so a user refused again and again starts one
// model request per run of refusals, not one per message.
func TestRefusedTurnsShowNothingAndCostOneCancelledModelRequestPerRun(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + redistest.Start(t))
	cfg.AuthSecret = gateway.Secret(strings.Repeat("k", 32))
	cfg.UserStorageBytes = 4 << 10
	g := startGateway(t, cfg, always{fakegemini.TextReply("noted", 1)})
	cancelled := func() float64 {
		return testutil.ToFloat64(g.gw.sessions.Metrics.ModelRequests.WithLabelValues("text", "cancelled"))
	}
	c := g.dial("", bearer(t, cfg, "alice"))
	c.start(nil)
	msg := strings.Repeat("x", 3000)

	c.send(map[string]any{"type": "text", "text": msg})
	if ev := c.next(); ev.typ() != "turn.start" {
		t.Fatalf("the first message: %v, want turn.start", ev)
	}
	if done := c.until("turn.done"); last(done).str("reason") != "end_turn" {
		t.Fatalf("the first turn: %v", done)
	}
	for i := 1; i <= 3; i++ {
		c.send(map[string]any{"type": "text", "text": msg})
		if ev := c.next(); ev.typ() != "error" || ev.str("code") != "quota_exceeded" {
			t.Fatalf("message %d over the quota: first event %v, want error quota_exceeded", i+1, ev)
		}
	}
	if n := cancelled(); n != 1 {
		t.Fatalf("model requests cancelled for three refused turns in a row = %v, want 1 (the first; "+
			"the others asked Redis first)", n)
	}
	// Nothing of the refused turns reaches the browser later.
	c.send(map[string]any{"type": "ping"})
	if ev := c.next(); ev.typ() != "pong" {
		t.Fatalf("after the refusals: %v, want only the pong", ev)
	}
}
