package gateway_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// TestUserStorageStopsAtTheQuotaWithAClearError replays the probe's storage
// abuse on a real redis-server: one user types large messages, each in a new
// session. Once her sessions' history reaches TURNSTILE_USER_STORAGE_BYTES,
// her next message is refused `quota_exceeded` (not retryable), is not
// stored, and is counted; another user goes on. Markup is stored as typed:
// `<` is one byte in Redis, not a six-byte escape.
func TestUserStorageStopsAtTheQuotaWithAClearError(t *testing.T) {
	addr := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + addr)
	cfg.AuthSecret = gateway.Secret(strings.Repeat("k", 32))
	cfg.UserStorageBytes = 16 << 10
	g := startGateway(t, cfg, always{fakegemini.TextReply("noted", 1)})
	alice, bob := bearer(t, cfg, "alice"), bearer(t, cfg, "bob")
	msg := strings.Repeat("<p>", 1000) // 3,000 bytes as typed; 13,000 escaped

	// stored is the bytes of history of the sessions in Redis.
	ctx := context.Background()
	stored := func(ids []string) int {
		n := 0
		for _, id := range ids {
			for _, e := range rdb.LRange(ctx, "turnstile:{"+id+"}:history", 0, -1).Val() {
				n += len(e)
			}
		}
		return n
	}
	var sessions []string
	var refused event
	for range 10 {
		c := g.dial("", alice)
		sessions = append(sessions, c.start(nil).str("sessionId"))
		c.send(map[string]any{"type": "text", "text": msg})
		ev := answerTo(c)
		if ev.typ() == "error" {
			refused = ev
			// Asking again in the same session is refused again.
			c.send(map[string]any{"type": "text", "text": msg})
			if again := answerTo(c); again.typ() != "error" || again.str("code") != "quota_exceeded" {
				t.Fatalf("a second message over the quota: %v, want error quota_exceeded", again)
			}
			break
		}
		if ev.typ() != "turn.start" {
			t.Fatalf("alice's message %d: %v, want turn.start", len(sessions), ev)
		}
		if done := c.until("turn.done"); last(done).str("reason") != "end_turn" {
			t.Fatalf("alice's turn %d: %v", len(sessions), done)
		}
		_ = c.c.CloseNow()
	}
	if refused == nil {
		t.Fatalf("10 messages of 3 KB in 10 sessions were all accepted under a quota of %d bytes", cfg.UserStorageBytes)
	}
	if refused.str("code") != "quota_exceeded" || refused["retryable"] != false || !strings.Contains(refused.str("message"), "quota") {
		t.Fatalf("the message over the quota: %v, want error quota_exceeded, not retryable", refused)
	}
	// Refused where the quota had no room for it, and not stored.
	lastID := sessions[len(sessions)-1]
	testwait.For(t, "the refused messages taken back from the history", func() bool {
		return rdb.LLen(ctx, "turnstile:{"+lastID+"}:history").Val() == 0
	})
	held := stored(sessions)
	if held > cfg.UserStorageBytes || held+len(msg) <= cfg.UserStorageBytes {
		t.Fatalf("refused with %d bytes of alice's history in Redis: the quota of %d had room for a %d-byte message",
			held, cfg.UserStorageBytes, len(msg))
	}
	if n := g.refusals("quota_exceeded"); n != 2 {
		t.Fatalf("turnstile_refusals_total{reason=\"quota_exceeded\"} = %v, want 2", n)
	}
	// `<` is stored as one byte.
	first := rdb.LIndex(ctx, "turnstile:{"+sessions[0]+"}:history", 0).Val()
	if !strings.Contains(first, msg) || len(first) > len(msg)+64 {
		t.Fatalf("stored user entry is %d bytes (%.60q…), want the %d-byte message as typed", len(first), first, len(msg))
	}

	// Bob is not affected.
	c := g.dial("", bob)
	c.start(nil)
	if evs := c.ask(msg); last(evs).str("reason") != "end_turn" || len(ofType(evs, "error")) != 0 {
		t.Fatalf("bob's turn while alice is over her quota: %v", evs)
	}
}

// answerTo is the gateway's first answer to a text: turn.start or error.
func answerTo(c *wsClient) event {
	c.t.Helper()
	for {
		if ev := c.next(); ev.typ() == "turn.start" || ev.typ() == "error" {
			return ev
		}
	}
}
