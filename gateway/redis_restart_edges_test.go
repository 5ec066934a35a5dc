//go:build unix

package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/protocol"
)

// TestRedisThatRestartedEmptyKeepsResumesBlocksAndCaps: Redis restarts
// empty under three users' live sessions. Carol's session is on a node that
// is frozen (SIGSTOP) while Redis comes back, so it cannot be written back
// yet: her resume on another node, right away, is told to retry (4103, not
// 4004, which makes the client give the conversation up), and once the node
// runs again and writes it back, her retry resumes it. Mallory, blocked by
// ignore_user, stays blocked: her block is written back with her session.
// Alice, at her per-user connection cap, stays at it: the node holding her
// connections re-asserts their leases at once, not at the next renewal
// (minutes away here).
func TestRedisThatRestartedEmptyKeepsResumesBlocksAndCaps(t *testing.T) {
	srv := redistest.StartServer(t)
	secret := strings.Repeat("k", 32)
	frozen := startProcess(t, "REDIS_URL=redis://"+srv.Addr, "TURNSTILE_AUTH_SECRET="+secret)
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + srv.Addr)
	cfg.AuthSecret = gateway.Secret(secret)
	cfg.MaxSessionsPerUser = 2
	cfg.UserLeaseTTL = 5 * time.Minute // renewed every 100 s: only the re-assertion can bring the leases back
	a := startGateway(t, cfg, fakegemini.NewScript(
		callStep(fakegemini.Call{Name: "ignore_user", Args: map[string]any{"duration_seconds": 3600, "reason": "abuse"}}),
		textStep("I will not continue this conversation."),
	))
	b := startGateway(t, cfg, fakegemini.NewScript())
	alice, carol, mallory := bearer(t, cfg, "alice"), bearer(t, cfg, "carol"), bearer(t, cfg, "mallory")

	onFrozen := &testGateway{t: t, url: frozen.url}
	cc := onFrozen.dial("", carol)
	ready := cc.start(nil)
	cc.ask("hello")

	mc := a.dial("", mallory)
	mc.start(nil)
	if blocked := ofType(mc.ask("you are useless"), "blocked"); len(blocked) != 1 {
		t.Fatal("mallory was not blocked")
	}
	for range 2 {
		a.dial("", alice).start(nil)
	}
	if c, r := b.tryUpgrade(alice, ""); c != nil || r.status != http.StatusTooManyRequests {
		t.Fatalf("alice's third connection before the restart: %+v, want 429", r)
	}

	if err := frozen.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = frozen.cmd.Process.Signal(syscall.SIGCONT) }) // before its stop
	srv.Stop()
	srv.Restart()

	// Carol resumes on B at once: nothing holds her session that could
	// write it back, and she is told to retry, never refused.
	testwait.For(t, "carol's resume to be told the session is being restored", func() bool {
		ev, closed := tryResume(t, b, carol, ready)
		if ev != nil {
			t.Fatalf("carol resumed a session Redis lost before any node wrote it back: %v", ev)
		}
		if closed.Code != protocol.CloseStoreUnavailable && closed.Code != 0 {
			t.Fatalf("carol's resume right after Redis restarted empty: closed %d %q, want 4103 (retry)",
				closed.Code, closed.Reason)
		}
		// Until B reaches the new Redis it answers store_unavailable (4103 too).
		return closed.Reason == protocol.DisconnectRestoring.Reason
	})
	if n := b.sessionsRefused("restoring"); n < 1 {
		t.Fatalf("sessions_refused_total{reason=\"restoring\"} = %v, want at least 1", n)
	}

	// Her node runs again and writes her session back: her retry resumes it.
	if err := frozen.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var again event
	testwait.For(t, "carol's retry to resume her session", func() bool {
		ev, closed := tryResume(t, b, carol, ready)
		if ev == nil && closed.Code != protocol.CloseStoreUnavailable && closed.Code != 0 {
			t.Fatalf("carol's retry: closed %d %q, want 4103 until her session is back", closed.Code, closed.Reason)
		}
		again = ev
		return ev != nil
	})
	if again["resumed"] != true || !strings.HasPrefix(historyTexts(again), "user:hello|model:") {
		t.Fatalf("carol's resume after the restoration: %v", again)
	}

	// Mallory's block was written back with her session: a new connection
	// of hers, on the other node, is refused.
	rdb := redisClientFor(t, cfg)
	ctx := context.Background()
	testwait.For(t, "mallory's block written back", func() bool {
		return rdb.Exists(ctx, "turnstile:user:{mallory}:block").Val() == 1
	})
	nc := b.dial("", mallory)
	nc.send(map[string]any{"type": "session.start"})
	if ev := nc.next(); ev.typ() != "blocked" {
		t.Fatalf("mallory's new connection after the restart: %v, want blocked", ev)
	}
	if code := nc.expectClose(); code != protocol.CloseBlocked {
		t.Fatalf("mallory's new connection closed %d, want %d", code, protocol.CloseBlocked)
	}

	// Alice's two connections on A count again: a third is refused.
	testwait.For(t, "alice's leases re-asserted", func() bool {
		return rdb.ZCard(ctx, "turnstile:user:{alice}:conns").Val() == 2
	})
	if c, r := b.tryUpgrade(alice, ""); c != nil || r.status != http.StatusTooManyRequests {
		t.Fatalf("alice's third connection after the restart: %+v, want 429", r)
	}
}

// tryResume resumes ready's session on g as user: the session.ready it got,
// or how the connection was closed (the zero CloseError when the upgrade
// was refused or the socket dropped without a close frame).
func tryResume(t *testing.T, g *testGateway, user http.Header, ready event) (event, websocket.CloseError) {
	t.Helper()
	c, _ := g.tryUpgrade(user, "")
	if c == nil {
		return nil, websocket.CloseError{}
	}
	defer func() { _ = c.c.CloseNow() }()
	msg := resumeMsg(ready)
	msg["type"] = "session.start"
	c.send(msg)
	for {
		ev, err := c.read()
		if err != nil {
			var ce websocket.CloseError
			errors.As(err, &ce)
			return nil, ce
		}
		if ev.typ() == "session.ready" {
			return ev, websocket.CloseError{}
		}
	}
}
