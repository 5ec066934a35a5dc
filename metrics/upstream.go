package metrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// ConnectReason is why the gateway opens a Live upstream connection: the
// closed set of turnstile_upstream_connects_total's reason label. Every open
// of any reason takes a place in the same per-session and per-user budget
// (TURNSTILE_LIVE_CONNECTS_PER_MINUTE, TURNSTILE_USER_LIVE_CONNECTS_PER_MINUTE).
type ConnectReason string

// The reasons an upstream is opened.
const (
	// ConnectVoiceStart: a move into voice (voice.start, session.start in
	// voice, start_voice_session).
	ConnectVoiceStart ConnectReason = "voice_start"
	// ConnectResume: a browser resumed a session that was in voice.
	ConnectResume ConnectReason = "resume"
	// ConnectGoAway: the upstream announced goAway (or closed after it) and
	// is replaced.
	ConnectGoAway ConnectReason = "go_away"
	// ConnectReconnect: the upstream closed unexpectedly and is reopened.
	ConnectReconnect ConnectReason = "reconnect"
)

// ConnectReasons is the closed set, in documentation order.
var ConnectReasons = []ConnectReason{ConnectVoiceStart, ConnectResume, ConnectGoAway, ConnectReconnect}

// The outcomes of one upstream open.
const (
	// ConnectOpened: the upstream connection was opened.
	ConnectOpened = "opened"
	// ConnectFailed: the provider refused or did not answer.
	ConnectFailed = "failed"
	// ConnectRefused: the budget refused it, or the node had no file
	// descriptor left for it; nothing was dialled.
	ConnectRefused = "refused"
)

// ConnectOutcomes is the closed set of the outcome label.
var ConnectOutcomes = []string{ConnectOpened, ConnectFailed, ConnectRefused}

func newUpstreamConnects(f factory) *prometheus.CounterVec {
	c := f.counterVec("turnstile_upstream_connects_total",
		"Live upstream connections the gateway tried to open, by reason (voice_start, resume, go_away, reconnect) "+
			"and outcome (opened, failed, refused by the connect budget or for want of a file descriptor).", "reason", "outcome")
	for _, r := range ConnectReasons {
		for _, o := range ConnectOutcomes {
			c.WithLabelValues(string(r), o)
		}
	}
	return c
}

// UpstreamConnect counts one upstream open; a reason or outcome outside its
// set is counted as reconnect or failed, keeping the labels bounded.
func (m *Metrics) UpstreamConnect(reason ConnectReason, outcome string) {
	if !slices.Contains(ConnectReasons, reason) {
		reason = ConnectReconnect
	}
	if !slices.Contains(ConnectOutcomes, outcome) {
		outcome = ConnectFailed
	}
	m.UpstreamConnects.WithLabelValues(string(reason), outcome).Inc()
}
