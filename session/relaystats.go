package session

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/session/voice"
)

// relayStats are a connection's audio figures, their series resolved once
// (the audio path allocates nothing): the browser's audio frames
// (turnstile_browser_messages_total{type="audio"}), and the time one
// frame in voice.RelaySampleEvery spends crossing the gateway, each way
// (turnstile_relay_added_seconds).
type relayStats struct {
	audioIn   prometheus.Counter
	in, out   prometheus.Observer
	micFrames uint // the reader's frames sent up, for the sampling; the reader's own
}

func newRelayStats(m *metrics.Metrics, ch metrics.Channel) relayStats {
	return relayStats{audioIn: m.BrowserAudio(), in: m.RelayObserver(ch, metrics.RelayIn),
		out: m.RelayObserver(ch, metrics.RelayOut)}
}

// micSent notes a microphone frame read at read that has been written
// upstream; one in voice.RelaySampleEvery is timed. Reader only.
func (r *relayStats) micSent(read time.Time) {
	if r.micFrames++; r.micFrames%voice.RelaySampleEvery == 0 {
		r.in.Observe(clock.Wall.Since(read).Seconds())
	}
}

// written notes model audio queued at received that has been written to
// the browser (the voice side samples which frames carry a time). Writer
// only.
func (r *relayStats) written(received time.Time) {
	r.out.Observe(clock.Wall.Since(received).Seconds())
}
