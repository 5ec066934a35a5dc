package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/metrics"
)

// A text or idle session holds one file descriptor, a voice session two
// (its model connection): the node counts what each really holds against
// the room its open-file limit leaves, refuses a connection at accept and a
// voice start cleanly when none is left, and gives both back as they close.
func TestVoiceStartIsRefusedWhenTheNodeHasNoDescriptorLeftForTheModel(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.FileLimit = 256 + 3 // three descriptors beside the 256 the gateway keeps for Redis, files and the model's HTTP
	cfg.MaxConnections, cfg.MaxSessions = 3, 3
	cfg.UnauthShare = 1 // no share of their own for connections not yet upgraded: not under test
	g, script := startVoiceGateway(t, cfg, fakegemini.NewScript(textStep("Still here, in text.")))

	a, _, up := startInVoice(t, g, script) // two descriptors: the browser's and the model's
	b := g.dial("", nil)
	b.start(nil) // the third
	// Three connections are allowed, but the third descriptor is taken.
	if c, r := g.tryUpgrade(nil, ""); c != nil || r.status != 0 {
		t.Fatalf("a third connection with every descriptor held: %+v, want it closed at accept", r)
	}
	if code, body := get(t, g.adminURL+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "max_connections") {
		t.Fatalf("/readyz with every descriptor held: %d %s, want 503 full max_connections", code, body)
	}

	b.send(map[string]any{"type": "voice.start"})
	ev := b.next()
	if ev.typ() != "error" || ev.str("code") != "upstream_unavailable" || ev["retryable"] != true ||
		!strings.Contains(ev.str("message"), "no room for another voice connection") {
		t.Fatalf("voice.start with no descriptor left: %v, want a retryable upstream_unavailable saying why", ev)
	}
	noUpstream(t, script)
	refused := testutil.ToFloat64(g.gw.sessions.Metrics.UpstreamConnects.WithLabelValues(string(metrics.ConnectVoiceStart), metrics.ConnectRefused))
	if refused != 1 {
		t.Fatalf("upstream_connects_total{voice_start,refused} = %v, want 1", refused)
	}
	// The session goes on in text.
	if evs := b.ask("are you there?"); last(evs).str("reason") != "end_turn" ||
		!strings.Contains(last(ofType(evs, "text.done")).str("text"), "in text") {
		t.Fatalf("a text turn after the refusal: %v", evs)
	}

	// The voice session's model connection closes: its descriptor is free.
	a.send(map[string]any{"type": "voice.stop"})
	for ev := a.next(); ev.typ() != "mode"; ev = a.next() {
	}
	<-up.ended
	testwait.For(t, "the model connection's descriptor given back (/readyz 200)", func() bool {
		code, _ := get(t, g.adminURL+"/readyz")
		return code == http.StatusOK
	})
	b.send(map[string]any{"type": "voice.start"})
	if ev := b.next(); ev.typ() != "mode" || ev.str("mode") != "voice" {
		t.Fatalf("voice.start with a descriptor free: %v, want voice", ev)
	}
	nextUpstream(t, script)
}
