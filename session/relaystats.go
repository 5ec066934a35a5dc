package session

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/session/voice"
)

// A connection's audio figures: the browser's audio frames
// (turnstile_browser_messages_total{type="audio"}), model audio out by
// its path (turnstile_audio_out_frames_total), and the time one
// frame in voice.RelaySampleEvery spends crossing the gateway, each way
// (turnstile_relay_added_seconds). The series are the channel's
// (conn.relay); the microphone frames counted for the sampling are the
// reader's own (conn.micFrames), kept apart from what the pump reads.

// relaySeries are a channel's audio series, resolved once per node (the
// audio path allocates nothing) and shared by its connections rather than
// copied into each (40 bytes a connection).
type relaySeries struct {
	audioIn prometheus.Counter
	in, out prometheus.Observer
	// Model audio out, written by the pump itself, queued, or written to
	// a socket an event loop serves (turnstile_audio_out_frames_total).
	direct, queued, loop prometheus.Counter
}

func newRelaySeries(m *metrics.Metrics, ch metrics.Channel) *relaySeries {
	return &relaySeries{audioIn: m.BrowserAudio(), in: m.RelayObserver(ch, metrics.RelayIn),
		out: m.RelayObserver(ch, metrics.RelayOut), direct: m.AudioOutCounter(ch, metrics.AudioDirect),
		queued: m.AudioOutCounter(ch, metrics.AudioQueued), loop: m.AudioOutCounter(ch, metrics.AudioLoop)}
}

// newRelayStats are the series of a connection on channel ch.
func (m *Manager) newRelayStats(ch metrics.Channel) *relaySeries {
	s := m.relays[ch]
	if s == nil {
		s = newRelaySeries(m.Metrics, ch)
	}
	return s
}

// micSent notes a microphone frame read at read that has been written
// upstream; one in voice.RelaySampleEvery is timed. Reader only.
func (c *conn) micSent(read time.Time) {
	if c.micFrames++; c.micFrames%voice.RelaySampleEvery == 0 {
		c.relay.in.Observe(clock.Wall.Since(read).Seconds())
	}
}

// written notes model audio queued at received that has been written to
// the browser (the voice side samples which frames carry a time). Writer
// only.
func (r *relaySeries) written(received time.Time) {
	r.out.Observe(clock.Wall.Since(received).Seconds())
}
