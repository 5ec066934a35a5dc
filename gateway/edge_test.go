package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/server"
)

func TestBadInputGetsAnErrorAndTheSessionGoesOn(t *testing.T) {
	g := startGateway(t, defaultTestConfig(t), fakegemini.NewScript(fakegemini.Fixed(fakegemini.TextReply("still here", 1))))
	c := g.dial("", nil)
	c.start(nil)
	for _, tc := range []struct{ raw, code string }{
		{`{not json`, "bad_json"},
		{`"just a string"`, "bad_json"},
		{`{"type":"teleport"}`, "unknown_type"},
		{`{"type":"text"}`, "bad_message"},
		{`{"type":"text","text":"\u0007\u0000 "}`, "bad_message"}, // nothing left once stripped
	} {
		c.sendRaw([]byte(tc.raw))
		ev := c.next()
		if ev.typ() != "error" || ev.str("code") != tc.code || ev["retryable"] != false {
			t.Fatalf("%s → %v, want error %s", tc.raw, ev, tc.code)
		}
	}
	// Audio in a text session is refused, not forwarded anywhere.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.c.Write(ctx, websocket.MessageBinary, make([]byte, 640)); err != nil {
		t.Fatal(err)
	}
	if ev := c.next(); ev.str("code") != "bad_message" {
		t.Fatalf("audio in text mode → %v, want error bad_message", ev)
	}
	c.send(map[string]any{"type": "ping"})
	if ev := c.next(); ev.typ() != "pong" {
		t.Fatalf("ping → %v", ev)
	}
	// Control characters are stripped, not refused: the turn goes on without them.
	evs := c.ask("hel\x00lo\u0007?")
	if last(evs).str("reason") != "end_turn" {
		t.Fatalf("session did not go on: %v", evs)
	}
	if start := ofType(evs, "turn.start"); len(start) != 1 || start[0].str("text") != "hello?" {
		t.Fatalf("turn.start = %v, want the text without control characters", start)
	}
}

func TestFirstMessageMustBeSessionStart(t *testing.T) {
	g := startGateway(t, defaultTestConfig(t), fakegemini.NewScript())
	for _, first := range []string{`{"type":"text","text":"hi"}`, `{oops`, `{"type":"ping"}`} {
		c := g.dial("", nil)
		c.sendRaw([]byte(first))
		if code := c.expectClose(); code != 4002 {
			t.Fatalf("first message %s → close %d, want 4002", first, code)
		}
	}
	// A second session.start is a protocol violation too.
	c := g.dial("", nil)
	c.start(nil)
	c.send(map[string]any{"type": "session.start"})
	if code := c.expectClose(); code != 4002 {
		t.Fatalf("second session.start → close %d, want 4002", code)
	}
}

func TestOversizedFrameClosesWith1009AndTheGatewayIsUnharmed(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.MaxMessageBytes = 4096
	g := startGateway(t, cfg, fakegemini.NewScript(fakegemini.Fixed(fakegemini.TextReply("ok", 1))))
	c := g.dial("", nil)
	c.start(nil)
	// The gateway closes once it has read past its limit, so the end of this
	// write may find the socket gone (broken pipe): what matters is the close
	// code the client reads next.
	big, _ := json.Marshal(map[string]any{"type": "text", "text": strings.Repeat("x", 5000)})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.c.Write(ctx, websocket.MessageText, big)
	if code := c.expectClose(); code != websocket.StatusMessageTooBig {
		t.Fatalf("close code %d, want 1009", code)
	}
	c2 := g.dial("", nil)
	c2.start(nil)
	if evs := c2.ask("small"); last(evs).str("reason") != "end_turn" {
		t.Fatalf("gateway harmed: %v", evs)
	}
}

func TestResumeRefusedForWrongTokenUnknownSessionOrOtherUser(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.AuthSecret = gateway.Secret(strings.Repeat("k", 32))
	g := startGateway(t, cfg, fakegemini.NewScript())
	alice, bob := bearer(t, cfg, "alice"), bearer(t, cfg, "bob")

	c := g.dial("", alice)
	ready := c.start(nil)
	id, tok := ready.str("sessionId"), ready.str("resumeToken")

	for name, tc := range map[string]struct {
		header    http.Header
		id, token string
	}{
		"wrong token":     {alice, id, strings.Repeat("A", len(tok))},
		"unknown session": {alice, "s_doesnotexist12345678", tok},
		"other user":      {bob, id, tok},
	} {
		c := g.dial("", tc.header)
		c.send(map[string]any{"type": "session.start", "resume": map[string]any{"sessionId": tc.id, "resumeToken": tc.token}})
		ev := c.next()
		if ev.str("code") != "resume_refused" || ev["retryable"] != false {
			t.Fatalf("%s: %v, want resume_refused", name, ev)
		}
		if code := c.expectClose(); code != 4004 {
			t.Fatalf("%s: close %d, want 4004", name, code)
		}
	}
	// None of the refused attempts disturbed the owner's connection.
	c.send(map[string]any{"type": "ping"})
	if ev := c.next(); ev.typ() != "pong" {
		t.Fatalf("owner's connection after refused resumes: %v", ev)
	}
}

func TestTokensAreCheckedBeforeTheUpgrade(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.AuthSecret = gateway.Secret(strings.Repeat("k", 32))
	g := startGateway(t, cfg, fakegemini.NewScript())
	forged, err := server.MintToken([]byte(strings.Repeat("x", 32)), "mallory", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]http.Header{
		"missing": nil,
		"forged":  {"Authorization": {"Bearer " + forged}},
	} {
		req, _ := http.NewRequest("GET", g.url+"/v1/ws", nil)
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s token: HTTP %d %s, want 401", name, resp.StatusCode, body)
		}
	}
	tok, _ := server.MintToken([]byte(cfg.AuthSecret), "carol", time.Hour)
	c := g.dial("?access_token="+tok, nil)
	c.start(nil)
}

func TestReconnectOnSameNodeTakesTheSessionOver(t *testing.T) {
	g := startGateway(t, defaultTestConfig(t), fakegemini.NewScript())
	c1 := g.dial("", nil)
	ready := c1.start(nil)
	c2 := g.dial("", nil)
	again := c2.start(map[string]any{"resume": map[string]any{
		"sessionId": ready.str("sessionId"), "resumeToken": ready.str("resumeToken")}})
	if again["resumed"] != true || again.str("sessionId") != ready.str("sessionId") {
		t.Fatalf("resume: %v", again)
	}
	if code := c1.expectClose(); code != 4005 {
		t.Fatalf("old connection closed with %d, want 4005", code)
	}
}

func TestSlowBrowserIsDisconnectedAsTooSlow(t *testing.T) {
	g := dropSlowBrowser(t, 200*time.Millisecond)
	slow := testutil.ToFloat64(g.gw.sessions.Metrics.BrowserDisconnect.WithLabelValues("too_slow")) +
		testutil.ToFloat64(g.gw.sessions.Metrics.BrowserDisconnect.WithLabelValues("write_failed"))
	if slow != 1 {
		t.Fatalf("disconnect not counted as too_slow or write_failed")
	}
}

// TestBrowserThatStopsReadingInATextTurnIsClosedTooSlow: a text turn's
// events are written by the turn itself when nothing is queued; a browser
// that stops reading in the middle of an answer is closed as too slow
// (4101: reconnect and resume), as it is when model audio is written
// directly, after as long as the send queue's bound holds (64 KiB: 1.4 s),
// not held to the write timeout and dropped as a failed write.
func TestBrowserThatStopsReadingInATextTurnIsClosedTooSlow(t *testing.T) {
	g := dropSlowBrowser(t, time.Minute)
	m := g.gw.sessions.Metrics.BrowserDisconnect
	if tooSlow, writeFailed := testutil.ToFloat64(m.WithLabelValues("too_slow")),
		testutil.ToFloat64(m.WithLabelValues("write_failed")); tooSlow != 1 || writeFailed != 0 {
		t.Fatalf("disconnects counted: too_slow %v, write_failed %v; want one too_slow", tooSlow, writeFailed)
	}
}

// dropSlowBrowser starts a gateway with a 64 KiB send queue and
// writeTimeout whose model answers 8 MB of text in 10 KB deltas (more than
// the socket buffers hold), asks it a question from a browser that never
// reads again, and waits until the gateway has dropped that browser.
func dropSlowBrowser(t *testing.T, writeTimeout time.Duration) *testGateway {
	t.Helper()
	cfg := defaultTestConfig(t)
	cfg.SendQueueBytes = 64 << 10
	cfg.WriteTimeout = writeTimeout
	// 8 MB of answer in 10 KB deltas: more than the socket buffers hold.
	long := strings.Repeat("lorem ipsum ", 700_000)
	g := startGateway(t, cfg, fakegemini.NewScript(fakegemini.Fixed(fakegemini.TextReply(long, 800))))
	c := g.dial("", nil)
	c.start(nil)
	c.send(map[string]any{"type": "text", "text": "tell me everything"}) // and never read again
	testwait.For(t, "the slow connection to be dropped", func() bool {
		return g.gw.sessions.Active() == 0
	})
	return g
}

func TestDrainClosesConnectionsWithReconnectCode(t *testing.T) {
	g := startGateway(t, defaultTestConfig(t), fakegemini.NewScript())
	c := g.dial("", nil)
	c.start(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	go g.gw.sessions.Drain(ctx)
	if code := c.expectClose(); code != 4100 {
		t.Fatalf("drain closed with %d, want 4100", code)
	}
	// New connections are refused while draining.
	c2 := g.dial("", nil)
	if code := c2.expectClose(); code != 4100 {
		t.Fatalf("connection during drain closed with %d, want 4100", code)
	}
}

func TestHealthReadyAndMetricsEndpoints(t *testing.T) {
	g := startGateway(t, defaultTestConfig(t), nil)
	c := g.dial("", nil)
	c.start(nil)
	c.ask("what is your shipping time?")
	for _, tc := range []struct {
		base, path string
		want       []string
	}{
		{g.adminURL, "/healthz", []string{`"ok"`}},
		{g.adminURL, "/readyz", []string{`"ready":true`}},
		{g.adminURL, "/metrics", []string{"turnstile_build_info{", `turnstile_tool_calls_total{channel="browser",outcome="ok",tool="kb_search"} 1`,
			`turnstile_sessions_active{channel="browser",mode="text"} 1`,
			`turnstile_turns_total{channel="browser",mode="text",reason="end_turn"} 1`,
			"go_goroutines", "process_resident_memory_bytes", "turnstile_redis_duration_seconds_bucket",
			`turnstile_refusals_total{channel="browser",reason="max_sessions"} 0`}},
		{g.adminURL, "/metrics/summary", []string{`"tools"`}},
		// Load balancers probe the public listener.
		{g.url, "/healthz", []string{`"ok"`}},
		{g.url, "/readyz", []string{`"ready":true`}},
		{g.url, "/", []string{"<!doctype html>"}},
	} {
		code, body := get(t, tc.base+tc.path)
		if code != 200 {
			t.Fatalf("%s%s: HTTP %d", tc.base, tc.path, code)
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Fatalf("%s%s does not contain %q", tc.base, tc.path, w)
			}
		}
	}
}

func TestPublicListenerServesNoMetrics(t *testing.T) {
	g := startGateway(t, defaultTestConfig(t), nil)
	for _, path := range []string{"/metrics", "/metrics/summary", "/debug/pprof/"} {
		code, body := get(t, g.url+path)
		if code != http.StatusNotFound || strings.Contains(body, "turnstile_") {
			t.Errorf("public %s: HTTP %d %.80q, want 404 without metrics", path, code, body)
		}
	}
	if code, _ := get(t, g.adminURL+"/v1/ws"); code != http.StatusNotFound {
		t.Errorf("admin /v1/ws: HTTP %d, want 404: sessions are on the public listener only", code)
	}
}

func bearer(t *testing.T, cfg gateway.Config, user string) http.Header {
	t.Helper()
	tok, err := server.MintToken([]byte(cfg.AuthSecret), user, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return http.Header{"Authorization": {"Bearer " + tok}}
}

func TestForeignOriginIsRefusedBeforeTheUpgrade(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.AllowedOrigins = []string{"https://app.example.com"}
	g := startGateway(t, cfg, fakegemini.NewScript())
	if _, err := g.tryDial("", http.Header{"Origin": {"https://evil.example.net"}}); err == nil {
		t.Fatal("a foreign Origin was accepted")
	}
	c := g.dial("", http.Header{"Origin": {"https://app.example.com"}})
	c.start(nil)
}
