package gateway_test

import (
	"fmt"
	"testing"

	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// A browser voice session and a phone call on one gateway are counted
// apart on /metrics: sessions and turns carry channel="browser" and
// channel="twilio", so an operator sees how much of the load is calls.
func TestMetricsSplitSessionsAndTurnsByChannel(t *testing.T) {
	g, script := startCallGateway(t, defaultTestConfig(t))
	metricsURL := g.adminURL + "/metrics"

	browser, _, u := startInVoice(t, g, script)
	must(t, u.SendAudio(pcm24Tone(440, 0, 2400)))
	must(t, u.SendTurnComplete(nil))
	browser.recvUntil("turn.done")
	// The call: the model greets the caller (turn 1), and answers once more.
	call, cu, _ := dialCall(t, g, script)
	must(t, cu.SendAudio(pcm24Tone(1000, 0, 2400)))
	must(t, cu.SendTurnComplete(nil))
	hearUntilMark(t, call)

	value := func(name string, labels map[string]string) float64 {
		return scrapeValue(t, metricsURL, name, labels)
	}
	want := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"turnstile_sessions_started_total", map[string]string{"kind": "new", "channel": "browser"}, 1},
		{"turnstile_sessions_started_total", map[string]string{"kind": "new", "channel": "twilio"}, 1},
		{"turnstile_sessions_active", map[string]string{"mode": "voice", "channel": "browser"}, 1},
		{"turnstile_sessions_active", map[string]string{"mode": "voice", "channel": "twilio"}, 1},
		{"turnstile_sessions_active", map[string]string{"mode": "text", "channel": "twilio"}, 0},
		{"turnstile_turns_total", map[string]string{"mode": "voice", "reason": "end_turn", "channel": "browser"}, 1},
		{"turnstile_turns_total", map[string]string{"mode": "voice", "reason": "end_turn", "channel": "twilio"}, 2},
	}
	// A turn is counted just before its turn.done (or mark) is sent.
	var mismatch string
	t.Cleanup(func() {
		if t.Failed() {
			t.Log("last mismatch:", mismatch)
		}
	})
	testwait.For(t, "sessions and turns split by channel on /metrics", func() bool {
		for _, c := range want {
			if got := value(c.name, c.labels); got != c.want {
				mismatch = fmt.Sprintf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
				return false
			}
		}
		return true
	})

	// Both end: each is counted as ended on its own channel.
	_ = browser.c.CloseNow()
	_ = call.Close()
	u.waitEnded()
	cu.waitEnded()
	testwait.For(t, "both sessions gone from sessions_active", func() bool {
		return value("turnstile_sessions_active", map[string]string{"mode": "voice", "channel": "browser"}) == 0 &&
			value("turnstile_sessions_active", map[string]string{"mode": "voice", "channel": "twilio"}) == 0
	})
}
