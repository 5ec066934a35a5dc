package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/server"
)

// End-to-end tests of how a session's connection lasts: resume that fits
// the send queue, tokens that end, idle connections reaped.

func TestResumeOfAHistoryLargerThanTheQueueFitsThenPagesBack(t *testing.T) {
	cfg := sharedRedisConfig(t) // the resume and history scripts on a real redis-server
	cfg.TurnsPerMinute = 0
	const turns, size = 30, 7000
	brain := fakegemini.NewScript()
	for i := range turns {
		brain.Push(textStep(strings.Repeat(string(rune('A'+i%26)), size)))
	}
	g := startGateway(t, cfg, brain)
	c := g.dial("", nil)
	ready := c.start(nil)
	var want []string
	for i := range turns {
		msg := strings.Repeat(string(rune('a'+i%26)), size)
		c.ask(msg)
		want = append(want, "user:"+msg, "model:"+strings.Repeat(string(rune('A'+i%26)), size))
	}
	_ = c.c.CloseNow()

	// About 420 KB of history; the send queue holds 256 KiB.
	c2 := g.dial("", nil)
	raw := c2.startRaw(map[string]any{"resume": map[string]any{
		"sessionId": ready.str("sessionId"), "resumeToken": ready.str("resumeToken")}})
	if len(raw) > cfg.SendQueueBytes/2 {
		t.Fatalf("session.ready is %d bytes, more than half the send queue", len(raw))
	}
	var again struct {
		Type             string           `json:"type"`
		Resumed          bool             `json:"resumed"`
		Turn             int              `json:"turn"`
		History          []map[string]any `json:"history"`
		HistoryTruncated bool             `json:"historyTruncated"`
	}
	if err := json.Unmarshal(raw, &again); err != nil {
		t.Fatal(err)
	}
	if again.Type != "session.ready" || !again.Resumed || again.Turn != turns || !again.HistoryTruncated ||
		len(again.History) == 0 || len(again.History) >= 2*turns {
		t.Fatalf("session.ready: resumed %v, turn %d, %d history entries, truncated %v", again.Resumed, again.Turn,
			len(again.History), again.HistoryTruncated)
	}
	got := historyLabels(again.History)

	// Page back to the beginning: every entry, whole, in order.
	oldest := int(again.History[0]["turn"].(float64))
	pages := 0
	for more := true; more; pages++ {
		c2.send(map[string]any{"type": "history", "before": oldest, "limit": 100})
		page := c2.next()
		if page.typ() != "history" {
			t.Fatalf("history request: %v", page)
		}
		entries, _ := page["entries"].([]any)
		if len(entries) == 0 {
			t.Fatalf("an empty page with more=%v", page["more"])
		}
		var items []map[string]any
		for _, e := range entries {
			items = append(items, e.(map[string]any))
		}
		got = append(historyLabels(items), got...)
		oldest = int(items[0]["turn"].(float64))
		more = page["more"] == true
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("paged history: %d entries, want the %d of the session, whole and in order", len(got), len(want))
	}
	if pages < 2 {
		t.Fatalf("%d pages: the answers were not cut to the queue", pages)
	}
	c2.send(map[string]any{"type": "ping"})
	if ev := c2.next(); ev.typ() != "pong" {
		t.Fatalf("after paging: %v", ev)
	}
	if g.refusals("resume_history_cut") != 1 {
		t.Fatalf("refusals{resume_history_cut} = %v, want 1", g.refusals("resume_history_cut"))
	}
}

// startRaw sends session.start and returns session.ready as sent.
func (c *wsClient) startRaw(msg map[string]any) []byte {
	c.t.Helper()
	msg["type"] = "session.start"
	c.send(msg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, b, err := c.c.Read(ctx)
	if err != nil {
		c.t.Fatalf("read session.ready: %v", err)
	}
	return b
}

func historyLabels(items []map[string]any) []string {
	out := make([]string, len(items))
	for i, it := range items {
		if it["truncated"] == true {
			out[i] = "(truncated)"
			continue
		}
		out[i] = it["role"].(string) + ":" + it["text"].(string)
	}
	return out
}

func TestTokenExpiryClosesTheConnectionUnlessRefreshed(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.AuthSecret = gateway.Secret(strings.Repeat("k", 32))
	cfg.AuthLeeway = 30 * time.Second
	clock := clock.NewFake(time.Now())
	cfg.Clock = clock
	g := startGateway(t, cfg, fakegemini.NewScript())
	token := func(user string, ttl time.Duration) string {
		tok, err := server.MintToken([]byte(cfg.AuthSecret), user, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	dialAs := func(tok string) *wsClient {
		return g.dial("", http.Header{"Authorization": {"Bearer " + tok}})
	}

	// Not refreshed: closed 4001 once exp and the leeway have passed. The
	// clock is set just before the token is minted (on the wall clock): the
	// gateway's start may have taken seconds on a busy machine since the
	// fake clock was made, and the steps below are a second apart.
	clock.Set(time.Now())
	stale := dialAs(token("alice", time.Hour))
	ready := stale.start(nil)
	clock.Advance(time.Hour + 29*time.Second)
	stale.send(map[string]any{"type": "ping"})
	if ev := stale.next(); ev.typ() != "pong" {
		t.Fatalf("within the leeway: %v", ev)
	}
	clock.Advance(2 * time.Second)
	if code := stale.expectClose(); code != 4001 {
		t.Fatalf("past exp and leeway: close %d, want 4001", code)
	}
	// The session resumes with a fresh token.
	clock.Set(time.Now())
	again := dialAs(token("alice", 2*time.Hour))
	if r := again.start(map[string]any{"resume": map[string]any{
		"sessionId": ready.str("sessionId"), "resumeToken": ready.str("resumeToken")}}); r["resumed"] != true {
		t.Fatalf("resume after 4001: %v", r)
	}
	_ = again.c.CloseNow()
	testwait.For(t, "the resumed connection to end", func() bool { return g.gw.sessions.Active() == 0 })

	// Refreshed with auth: the connection lasts until the new token's exp.
	clock.Set(time.Now())
	fresh := dialAs(token("bob", time.Hour))
	fresh.start(nil)
	newer := token("bob", 3*time.Hour)
	fresh.send(map[string]any{"type": "auth", "token": newer})
	ok := fresh.next()
	exp, err := time.Parse(time.RFC3339, ok.str("expiresAt"))
	if ok.typ() != "auth.ok" || err != nil || exp.Before(time.Now().Add(3*time.Hour-time.Minute)) {
		t.Fatalf("auth: %v, want auth.ok with the new token's expiry", ok)
	}
	clock.Advance(2 * time.Hour)
	fresh.send(map[string]any{"type": "ping"})
	if ev := fresh.next(); ev.typ() != "pong" {
		t.Fatalf("past the first token's exp after a refresh: %v", ev)
	}
	clock.Advance(time.Hour + time.Minute)
	if code := fresh.expectClose(); code != 4001 {
		t.Fatalf("past the refreshed token's exp: close %d, want 4001", code)
	}

	// A token of another user, or one that is not valid, ends the
	// connection.
	clock.Set(time.Now())
	forged, err := server.MintToken([]byte(strings.Repeat("x", 32)), "carol", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{"another user's": token("mallory", time.Hour), "a forged": forged} {
		c := dialAs(token("carol", time.Hour))
		c.start(nil)
		c.send(map[string]any{"type": "auth", "token": tok})
		if ev := c.next(); ev.typ() != "error" || ev.str("code") != "unauthenticated" || ev["retryable"] != false {
			t.Fatalf("auth with %s token: %v, want error unauthenticated", name, ev)
		}
		if code := c.expectClose(); code != 4001 {
			t.Fatalf("auth with %s token: close %d, want 4001", name, code)
		}
	}
	// Each refusal is counted just after its close goes out.
	g.waitRefusals(t, "token_expired", 2)
	g.waitRefusals(t, "auth_refused", 2)
}

func TestIdleConnectionsAreReapedAndThoseAnsweringPingsStay(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.PingInterval, cfg.IdleTimeout = 50*time.Millisecond, 300*time.Millisecond
	g := startGateway(t, cfg, fakegemini.NewScript())

	// A browser that reads its socket answers pings (the WebSocket layer
	// does it), and stays however long it says nothing.
	var pings atomic.Int32
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(g.url, "http") + "/v1/ws"
	ws, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{Subprotocols: []string{"turnstile.v1"},
		OnPingReceived: func(context.Context, []byte) bool { pings.Add(1); return true }})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	alive := &wsClient{t: t, c: ws}
	alive.start(nil)
	evs := make(chan event, 1)
	go func() {
		defer close(evs)
		for {
			ev, err := alive.read()
			if err != nil {
				return
			}
			evs <- ev
		}
	}()
	testwait.For(t, "pings over three idle timeouts", func() bool { return pings.Load() >= 20 })
	alive.send(map[string]any{"type": "ping"})
	if ev := <-evs; ev.typ() != "pong" {
		t.Fatalf("a browser answering pings after three idle timeouts: %v", ev)
	}

	// One that does not read (a half-open peer, a frozen tab) answers no
	// ping and is closed 4104: reconnect and resume.
	silent := g.dial("", nil)
	silent.start(nil)
	testwait.For(t, "the silent connection to be reaped", func() bool { return g.refusals("idle") == 1 })
	if code := silent.expectClose(); code != 4104 {
		t.Fatalf("idle connection closed %d, want 4104", code)
	}
	testwait.For(t, "the reaped connection to end", func() bool { return g.gw.sessions.Active() == 1 })
	alive.send(map[string]any{"type": "ping"})
	if ev := <-evs; ev.typ() != "pong" {
		t.Fatalf("the browser answering pings, after the other was reaped: %v", ev)
	}
}
