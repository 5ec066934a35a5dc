package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/store"
)

// What the browser is told of a mode change is stored first. Gateway A
// reaches the shared redis-server through a proxy that the test holds
// while the user ends voice; the browser, reconnecting, resumes on gateway
// B before A's write lands, and A's write is then refused (fenced). The
// session comes back in voice on B, as the record says: so A must not have
// told the browser it was back in text (told first, the user who ended
// voice would find it open again on B, the microphone and the model with
// it).
func TestModeChangeIsStoredBeforeTheBrowserHearsIt(t *testing.T) {
	addr := redistest.Start(t)
	proxy := startStallProxy(t, addr)
	cfgA := defaultTestConfig(t)
	cfgA.RedisURL = gateway.SecretURL("redis://" + proxy.addr())
	cfgA.RedisTimeout = 5 * time.Second // the held write is refused, not timed out
	cfgB := defaultTestConfig(t)
	cfgB.RedisURL = gateway.SecretURL("redis://" + addr)
	a, scriptA := startVoiceGateway(t, cfgA, nil)
	b, scriptB := startVoiceGateway(t, cfgB, nil)

	c, ready, uA := startInVoice(t, a, scriptA)
	id := ready.str("sessionId")
	st := store.NewRedisStore(redisClientFor(t, cfgB), store.RedisStoreOptions{})
	testwait.ForNil(t, "the record in voice", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		rec, _, err := st.Load(ctx, id)
		if err == nil && rec.Mode != protocol.ModeVoice {
			return errString("mode " + string(rec.Mode))
		}
		return err
	})

	proxy.pause()
	defer proxy.resume()
	c.send(map[string]any{"type": "voice.stop"})
	uA.waitEnded()
	testwait.For(t, "A's write of the mode held on its way to Redis", func() bool { return proxy.holds(id, "text") })

	onB := b.dial("", nil)
	again := onB.start(resumeMsg(ready))
	if again["resumed"] != true {
		t.Fatalf("resume on B: %v", again)
	}
	if ev := onB.next(); ev.typ() != "mode" || ev.str("mode") != "voice" {
		t.Fatalf("after resuming on B: %v, want mode voice (the record A could not update)", ev)
	}
	nextUpstream(t, scriptB)

	for _, ev := range c.eventsUntilClose("the connection on A", 4005) {
		if ev.typ() == "mode" && ev.str("mode") == "text" {
			t.Fatalf("A told the browser %v, but the session it resumed on B is in voice", ev)
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }
