package gateway_test

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/redistest"
)

// A browser that drops before any voice turn completed resumes its Live
// session, not a fresh upstream: the newest resumption handle is saved when
// the browser goes away, however soon after it arrived. Unlike
// TestVoiceResumeUsesTheHandleOfAnUnfinishedTurn, nothing here waits for
// the handle to reach the store before the browser drops.

// handleSeen sends two resumption updates (the second is the newest) and
// then audio, and waits for that audio at the browser: the events of one
// upstream are handled in order, so the gateway holds the newest handle
// now, although it may not have stored it yet.
func handleSeen(t *testing.T, c *wsClient, u *upstream) string {
	t.Helper()
	older, err := u.SendResumptionUpdate(true)
	must(t, err)
	newest, err := u.SendResumptionUpdate(true)
	must(t, err)
	if newest == older {
		t.Fatalf("the fake issued the same handle %q twice", newest)
	}
	must(t, u.SendAudio(pcm(1, 960)))
	c.recvAudio(960)
	return newest
}

func TestVoiceHandleIsSavedWhenTheBrowserDropsAtOnce(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + redistest.Start(t))
	g, script := startVoiceGateway(t, cfg, nil)
	c, ready, u := startInVoice(t, g, script)
	handle := handleSeen(t, c, u)
	c.c.CloseNow() // no turn completed, nothing waited for in the store

	// The resume comes at once too: it must not read the session before
	// the dropped connection's last writes landed.
	c2 := g.dial("", nil)
	r2 := c2.start(map[string]any{"resume": map[string]any{"sessionId": ready.str("sessionId"), "resumeToken": ready.str("resumeToken")}})
	if r2["resumed"] != true {
		t.Fatalf("session.ready %v, want resumed", r2)
	}
	u2 := nextUpstream(t, script)
	if got := u2.Setup.ResumeHandle(); got != handle {
		t.Fatalf("the resumed upstream asked for handle %q, want the newest %q", got, handle)
	}
	u.waitEnded()
}

// The same with Redis stalled from before the handles arrive until the
// dropped connection has hung up its upstream: no write can land before
// the browser is gone, so the handle reaches the store only through the
// writes of the connection's end.
func TestVoiceHandleIsSavedWhenTheBrowserDropsWhileRedisStalls(t *testing.T) {
	mr := miniredis.RunT(t)
	proxy := startStallProxy(t, mr.Addr())
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + proxy.addr())
	cfg.RedisTimeout = 5 * time.Second
	g, script := startVoiceGateway(t, cfg, nil)
	c, ready, u := startInVoice(t, g, script)
	must(t, u.SendAudio(pcm(2, 960)))
	c.recvAudio(960) // the voice side is up and idle on Redis

	proxy.pause()
	handle := handleSeen(t, c, u)
	c.c.CloseNow()
	u.waitEnded() // the voice side stopped: its final handle is the connection's to write
	proxy.resume()

	c2 := g.dial("", nil)
	c2.start(map[string]any{"resume": map[string]any{"sessionId": ready.str("sessionId"), "resumeToken": ready.str("resumeToken")}})
	u2 := nextUpstream(t, script)
	if got := u2.Setup.ResumeHandle(); got != handle {
		t.Fatalf("the resumed upstream asked for handle %q, want the newest %q", got, handle)
	}
}
