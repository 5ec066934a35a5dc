package gateway_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
)

// TestRefusedTurnsShowNothingAndReachNoModel: a typed turn's model request
// is built alongside its first Redis write (which counts the turn and
// checks the user's storage quota), and sent only once the verdict admits
// it. A turn the store refuses shows the browser only the refusal — no
// turn.start, no delta — and makes no model request, neither the first of
// a run of refusals (whose request was being built) nor the ones after it
// (which ask Redis first).
func TestRefusedTurnsShowNothingAndReachNoModel(t *testing.T) {
	cfg := tokenRedisConfig(t)
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
	if n, all := cancelled(), seriesSum(t, g.reg, "turnstile_model_requests_total", "kind", "text"); n != 0 || all != 1 {
		t.Fatalf("model requests: %v, %v of them cancelled, for one admitted turn and three refused; "+
			"want the admitted turn's only", all, n)
	}
	// Nothing of the refused turns reaches the browser later.
	c.send(map[string]any{"type": "ping"})
	if ev := c.next(); ev.typ() != "pong" {
		t.Fatalf("after the refusals: %v, want only the pong", ev)
	}
}
