package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/store"
)

// startPingFlood sends a ping message every 10 ms until the connection
// fails or the returned stop is called (which waits for the sender).
func startPingFlood(c *wsClient) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(10 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := c.c.Write(ctx, websocket.MessageText, []byte(`{"type":"ping"}`))
			cancel()
			if err != nil {
				return
			}
		}
	}()
	return func() { close(quit); <-done }
}

// floodUntilClosed floods the connection with pings until the gateway
// closes it, and returns how the read ended.
func floodUntilClosed(t *testing.T, c *wsClient) error {
	t.Helper()
	defer startPingFlood(c)()
	for {
		if _, err := c.read(); err != nil {
			return err
		}
	}
}

// After a 4008 for rate abuse the user is refused new connections and
// resumes on both nodes for the cooldown, with Retry-After; others are not;
// after the cooldown the user resumes; a second abuse doubles it.
func TestRateAbuseCoolsTheUserDownOnBothNodes(t *testing.T) {
	addr := redistest.Start(t)
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + addr)
	cfg.AuthSecret = gateway.Secret(strings.Repeat("k", 32))
	cfg.MessageRate, cfg.MessageBurst, cfg.RateAbuseAfter = 2, 3, time.Second
	cfg.AbuseCooldown = store.CooldownPolicy{First: time.Minute, Max: time.Hour, Memory: 24 * time.Hour}
	// The cooldowns go by the store's clock: it moves only when told.
	clock := clock.NewFake(time.Now())
	cfg.Clock = clock
	a := startGateway(t, cfg, fakegemini.NewScript())
	b := startGateway(t, cfg, fakegemini.NewScript())
	mallory, bob := bearer(t, cfg, "mallory"), bearer(t, cfg, "bob")

	c := a.dial("", mallory)
	ready := c.start(nil)
	resume := map[string]any{"resume": map[string]any{
		"sessionId": ready.str("sessionId"), "resumeToken": ready.str("resumeToken")}}
	expectCloseError(t, "the flood", floodUntilClosed(t, c), 4008, "; retry after 60 s")

	// Refused on either node before the upgrade: a new session and a
	// resume alike (the upgrade carries the user's token).
	refusedFor := func(want string) {
		t.Helper()
		for name, g := range map[string]*testGateway{"A": a, "B": b} {
			cl, r := g.tryUpgrade(mallory, "")
			if cl != nil || r.status != http.StatusTooManyRequests || r.retryAfter != want ||
				!strings.Contains(r.body, string(metrics.RefusedAbuseCooldown)) {
				t.Fatalf("mallory on %s during the cooldown: %+v, want 429 with Retry-After %s", name, r, want)
			}
		}
	}
	refusedFor("60")
	clock.Advance(59 * time.Second)
	refusedFor("1")
	// Another user is not affected, on either node.
	a.dial("", bob).start(nil)
	b.dial("", bob).start(nil)
	if n := a.refusals(metrics.RefusedAbuseCooldown) + b.refusals(metrics.RefusedAbuseCooldown); n != 4 {
		t.Fatalf("refusals{abuse_cooldown} = %v, want 4", n)
	}
	if n := a.sessionsRefused(string(metrics.RefusedAbuseCooldown)) + b.sessionsRefused(string(metrics.RefusedAbuseCooldown)); n != 4 {
		t.Fatalf("sessions_refused{abuse_cooldown} = %v, want 4", n)
	}

	// Once the cooldown is over, the user resumes the session on the other node.
	clock.Advance(time.Second)
	again := b.dial("", mallory)
	if r := again.start(resume); r["resumed"] != true {
		t.Fatalf("resume after the cooldown: %v", r)
	}

	// A second abuse doubles the cooldown.
	expectCloseError(t, "the second flood", floodUntilClosed(t, again), 4008, "; retry after 120 s")
	refusedFor("120")
	clock.Advance(2 * time.Minute)
	a.dial("", mallory).start(resume)
}

// A resume refused 4008 for resuming in a loop is rate abuse too: it starts
// the user's cooldown, on both nodes, and its reason says how long to wait.
func TestAResumeLoopRefused4008CoolsTheUserDownOnBothNodes(t *testing.T) {
	cfg := budgetConfig(t, redistest.Start(t), 0, 0)
	cfg.ResumesPerMinute, cfg.UserResumesPerMinute = 1, 100
	cfg.AbuseCooldown = store.CooldownPolicy{First: time.Minute, Max: time.Hour, Memory: 24 * time.Hour}
	// The cooldown goes by the store's clock: it moves only when told.
	cfg.Clock = clock.NewFake(time.Now())
	a, b := startGateway(t, cfg, fakegemini.NewScript()), startGateway(t, cfg, fakegemini.NewScript())
	mallory, bob := bearer(t, cfg, "mallory"), bearer(t, cfg, "bob")
	ready := a.dial("", mallory).start(nil)
	resume := map[string]any{"resume": map[string]any{
		"sessionId": ready.str("sessionId"), "resumeToken": ready.str("resumeToken")}}
	b.dial("", mallory).start(resume)
	second := a.dial("", mallory)
	second.send(map[string]any{"type": "session.start", "resume": resume["resume"]})
	if ev := second.next(); ev.typ() != "error" || ev.str("code") != "rate_limited" ||
		!strings.Contains(ev.str("message"), "try again in 60 s") {
		t.Fatalf("the second resume in a minute: %v, want rate_limited, try again in 60 s", ev)
	}
	_, err := second.read()
	expectCloseError(t, "the refused resume", err, 4008, "; retry after 60 s")
	for name, g := range map[string]*testGateway{"A": a, "B": b} {
		if cl, r := g.tryUpgrade(mallory, ""); cl != nil || r.status != http.StatusTooManyRequests || r.retryAfter != "60" ||
			!strings.Contains(r.body, string(metrics.RefusedAbuseCooldown)) {
			t.Fatalf("mallory on %s after the refused resume: %+v, want 429 abuse_cooldown, Retry-After 60", name, r)
		}
		g.dial("", bob).start(nil)
	}
}

// A user refused 4008 for creating sessions in a loop is cooled down too:
// on both nodes, with the wait in the 4008's reason and in the error, and
// the refusal counted.
func TestTooManyNewSessionsRefused4008CoolsTheUserDownOnBothNodes(t *testing.T) {
	cfg := budgetConfig(t, redistest.Start(t), 0, 0)
	cfg.NewSessionsPerMinute = 1
	cfg.AbuseCooldown = store.CooldownPolicy{First: 2 * time.Minute, Max: time.Hour, Memory: 24 * time.Hour}
	// The cooldown goes by the store's clock: it moves only when told.
	cfg.Clock = clock.NewFake(time.Now())
	a, b := startGateway(t, cfg, fakegemini.NewScript()), startGateway(t, cfg, fakegemini.NewScript())
	mallory := bearer(t, cfg, "mallory")
	a.dial("", mallory).start(nil)
	second := b.dial("", mallory)
	second.send(map[string]any{"type": "session.start"})
	if ev := second.next(); ev.typ() != "error" || ev.str("code") != "rate_limited" ||
		!strings.Contains(ev.str("message"), "try again in 120 s") {
		t.Fatalf("the second new session in a minute: %v, want rate_limited, try again in 120 s", ev)
	}
	_, err := second.read()
	expectCloseError(t, "the refused session", err, 4008, "; retry after 120 s")
	for name, g := range map[string]*testGateway{"A": a, "B": b} {
		if cl, r := g.tryUpgrade(mallory, ""); cl != nil || r.status != http.StatusTooManyRequests || r.retryAfter != "120" ||
			!strings.Contains(r.body, string(metrics.RefusedAbuseCooldown)) {
			t.Fatalf("mallory on %s after the refused session: %+v, want 429 abuse_cooldown, Retry-After 120", name, r)
		}
		g.dial("", bearer(t, cfg, "bob-"+name)).start(nil) // other users are not affected
	}
	if n := b.refusals(metrics.RefusedNewSessionsPerMinute); n != 1 {
		t.Fatalf("refusals{new_sessions_per_minute} on B = %v, want 1", n)
	}
}
