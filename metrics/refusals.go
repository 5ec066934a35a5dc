package metrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// Refusal reasons: the closed set of turnstile_refusals_total's reason label.
// Each names the limit that refused something; docs/operations.md has a
// section per limit. A reason outside the set is counted as "other".
const (
	// RefusedMaxConnections: a new connection to the public listener was
	// closed at accept because TURNSTILE_MAX_CONNECTIONS were open.
	RefusedMaxConnections = "max_connections"
	// RefusedMaxSessions: a WebSocket upgrade was answered 503 because the
	// node held TURNSTILE_MAX_SESSIONS upgraded connections.
	RefusedMaxSessions = "max_sessions"
	// RefusedMaxSessionsPerUser: a WebSocket upgrade was answered 429
	// because the user held TURNSTILE_MAX_SESSIONS_PER_USER connections
	// across all nodes.
	RefusedMaxSessionsPerUser = "max_sessions_per_user"
	// RefusedUnauthenticated: a WebSocket upgrade was answered 401 (no
	// token, or a token that is not acceptable).
	RefusedUnauthenticated = "unauthenticated"
	// RefusedOrigin: a WebSocket upgrade was answered 403 for its Origin
	// or, in dev mode, its Host.
	RefusedOrigin = "origin"
	// RefusedAbuseCooldown: a WebSocket upgrade was answered 429 because
	// the user was closed 4008 for rate abuse and its cooldown runs
	// (TURNSTILE_ABUSE_COOLDOWN).
	RefusedAbuseCooldown = "abuse_cooldown"
	// RefusedUnauthPerIP: one client IP (an IPv6 /64) held
	// TURNSTILE_UNAUTH_PER_IP connections that had not authenticated: its
	// connection idle the longest was closed to make room, or, none being
	// idle, the new one was (at accept; through a trusted proxy, answered
	// 429).
	RefusedUnauthPerIP = "unauth_per_ip"
	// RefusedUnauthShare: connections that had not authenticated held
	// their share of TURNSTILE_MAX_CONNECTIONS (TURNSTILE_UNAUTH_SHARE):
	// the one idle the longest was closed to make room, or, none being
	// idle, the new one was.
	RefusedUnauthShare = "unauth_share"
)

// IsConnectionRefusal reports whether reason refuses a connection before
// anything says what it is for (channel none; not a session refusal).
func IsConnectionRefusal(reason string) bool {
	return reason == RefusedMaxConnections || reason == RefusedUnauthPerIP || reason == RefusedUnauthShare
}

// refusalReasons is the closed set, each series created at zero so that a
// rate over it is defined before the first refusal.
var refusalReasons = []string{
	RefusedMaxConnections,
	RefusedMaxSessions,
	RefusedMaxSessionsPerUser,
	RefusedUnauthenticated,
	RefusedOrigin,
	RefusedAbuseCooldown,
	RefusedUnauthPerIP,
	RefusedUnauthShare,
	// The session's limits (session/limits.go, which counts them through
	// Refusals directly with these labels).
	"message_rate", "audio_rate", "turns_per_minute", "voice_starts_per_minute", "new_sessions_per_minute", "rate_abuse",
	"token_expired",
	"auth_refused", "idle", "invalid_utf8", "context_trimmed", "history_bytes", "resume_history_cut",
	"history_page_cut",
	"quota_exceeded",
	"live_connects_per_minute", "resumes_per_minute",
}

// refusalOther counts a reason outside the set, keeping the label bounded.
const refusalOther = "other"

// RefusalReasons returns the reason label values, "other" last.
func RefusalReasons() []string { return append(slices.Clone(refusalReasons), refusalOther) }

func newRefusals(f factory) *prometheus.CounterVec {
	c := f.counterVec("turnstile_refusals_total",
		"Requests, connections and messages refused by a limit of the edge or the session, by reason and channel "+
			"(browser, twilio; none for max_connections, unauth_per_ip and unauth_share, connections refused before anything says what they are for).",
		"reason", "channel")
	for _, r := range RefusalReasons() {
		if IsConnectionRefusal(r) {
			c.WithLabelValues(r, ChannelNone.String())
			continue
		}
		for _, ch := range Channels {
			c.WithLabelValues(r, ch.String())
		}
	}
	return c
}

// Refusal counts one refusal for reason (one of the Refused* constants;
// anything else is counted as "other") of a connection of channel ch
// (ChannelNone for IsConnectionRefusal's reasons).
func (m *Metrics) Refusal(reason string, ch Channel) {
	m.RefusalCounter(reason, ch).Inc()
}

// RefusalCounter is the series Refusal counts in, for a caller that looks
// it up once (a refusal on the audio path allocates nothing).
func (m *Metrics) RefusalCounter(reason string, ch Channel) prometheus.Counter {
	if !slices.Contains(refusalReasons, reason) {
		reason = refusalOther
	}
	return m.Refusals.WithLabelValues(reason, ch.String())
}
