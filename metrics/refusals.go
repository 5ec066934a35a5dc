package metrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// RefusalReason is the limit that refused something, the reason label of
// turnstile_refusals_total: a closed set, the constants below (the edge's,
// in package server, and the session's, in session/limits.go);
// docs/operations.md has a section per limit. A reason outside the set is
// counted as "other".
type RefusalReason string

// The edge's limits.
const (
	// RefusedMaxConnections: a new connection to the public listener was
	// closed at accept because TURNSTILE_MAX_CONNECTIONS were open.
	RefusedMaxConnections RefusalReason = "max_connections"
	// RefusedMaxSessions: a WebSocket upgrade was answered 503 because the
	// node held TURNSTILE_MAX_SESSIONS upgraded connections.
	RefusedMaxSessions RefusalReason = "max_sessions"
	// RefusedMaxSessionsPerUser: a WebSocket upgrade was answered 429
	// because the user held TURNSTILE_MAX_SESSIONS_PER_USER connections
	// across all nodes.
	RefusedMaxSessionsPerUser RefusalReason = "max_sessions_per_user"
	// RefusedUnauthenticated: a WebSocket upgrade was answered 401 (no
	// token, or a token that is not acceptable).
	RefusedUnauthenticated RefusalReason = "unauthenticated"
	// RefusedOrigin: a WebSocket upgrade was answered 403 for its Origin
	// or, in dev mode, its Host.
	RefusedOrigin RefusalReason = "origin"
	// RefusedAbuseCooldown: a WebSocket upgrade was answered 429 because
	// the user was closed 4008 for rate abuse and its cooldown runs
	// (TURNSTILE_ABUSE_COOLDOWN).
	RefusedAbuseCooldown RefusalReason = "abuse_cooldown"
	// RefusedUnauthPerIP: one client IP (an IPv6 /64) held
	// TURNSTILE_UNAUTH_PER_IP connections that had not authenticated: its
	// connection idle the longest was closed to make room, or, none being
	// idle, the new one was (at accept; through a trusted proxy, answered
	// 429).
	RefusedUnauthPerIP RefusalReason = "unauth_per_ip"
	// RefusedUnauthShare: connections that had not authenticated held
	// their share of TURNSTILE_MAX_CONNECTIONS (TURNSTILE_UNAUTH_SHARE):
	// the one idle the longest was closed to make room, or, none being
	// idle, the new one was.
	RefusedUnauthShare RefusalReason = "unauth_share"
)

// The session's limits (session/limits.go says what each refuses and how
// it is logged).
const (
	RefusedMessageRate           RefusalReason = "message_rate"
	RefusedAudioRate             RefusalReason = "audio_rate"
	RefusedTurnsPerMinute        RefusalReason = "turns_per_minute"
	RefusedVoiceStartsPerMinute  RefusalReason = "voice_starts_per_minute"
	RefusedNewSessionsPerMinute  RefusalReason = "new_sessions_per_minute"
	RefusedRateAbuse             RefusalReason = "rate_abuse"
	RefusedTokenExpired          RefusalReason = "token_expired"
	RefusedAuth                  RefusalReason = "auth_refused"
	RefusedIdle                  RefusalReason = "idle"
	RefusedInvalidUTF8           RefusalReason = "invalid_utf8"
	RefusedContextTrimmed        RefusalReason = "context_trimmed"
	RefusedHistoryBytes          RefusalReason = "history_bytes"
	RefusedResumeHistoryCut      RefusalReason = "resume_history_cut"
	RefusedHistoryPageCut        RefusalReason = "history_page_cut"
	RefusedQuotaExceeded         RefusalReason = "quota_exceeded"
	RefusedLiveConnectsPerMinute RefusalReason = "live_connects_per_minute"
	RefusedResumesPerMinute      RefusalReason = "resumes_per_minute"
)

// IsConnectionRefusal reports whether reason refuses a connection before
// anything says what it is for (channel none; not a session refusal).
func IsConnectionRefusal(reason RefusalReason) bool {
	return reason == RefusedMaxConnections || reason == RefusedUnauthPerIP || reason == RefusedUnauthShare
}

// refusalReasons is the closed set, each series created at zero so that a
// rate over it is defined before the first refusal.
var refusalReasons = []RefusalReason{
	RefusedMaxConnections, RefusedMaxSessions, RefusedMaxSessionsPerUser, RefusedUnauthenticated, RefusedOrigin,
	RefusedAbuseCooldown, RefusedUnauthPerIP, RefusedUnauthShare,
	RefusedMessageRate, RefusedAudioRate, RefusedTurnsPerMinute, RefusedVoiceStartsPerMinute,
	RefusedNewSessionsPerMinute, RefusedRateAbuse, RefusedTokenExpired, RefusedAuth, RefusedIdle, RefusedInvalidUTF8,
	RefusedContextTrimmed, RefusedHistoryBytes, RefusedResumeHistoryCut, RefusedHistoryPageCut, RefusedQuotaExceeded,
	RefusedLiveConnectsPerMinute, RefusedResumesPerMinute,
}

// refusalOther counts a reason outside the set, keeping the label bounded.
const refusalOther = "other"

// RefusalReasons returns the reason label values, "other" last.
func RefusalReasons() []string {
	out := make([]string, 0, len(refusalReasons)+1)
	for _, r := range refusalReasons {
		out = append(out, string(r))
	}
	return append(out, refusalOther)
}

func newRefusals(f factory) *prometheus.CounterVec {
	c := f.counterVec("turnstile_refusals_total",
		"Requests, connections and messages refused by a limit of the edge or the session, by reason and channel "+
			"(browser, twilio; none for max_connections, unauth_per_ip and unauth_share, connections refused before anything says what they are for).",
		"reason", "channel")
	for _, r := range RefusalReasons() {
		if IsConnectionRefusal(RefusalReason(r)) {
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
func (m *Metrics) Refusal(reason RefusalReason, ch Channel) {
	m.RefusalCounter(reason, ch).Inc()
}

// RefusalCounter is the series Refusal counts in, for a caller that looks
// it up once (a refusal on the audio path allocates nothing).
func (m *Metrics) RefusalCounter(reason RefusalReason, ch Channel) prometheus.Counter {
	if !slices.Contains(refusalReasons, reason) {
		reason = refusalOther
	}
	return m.Refusals.WithLabelValues(string(reason), ch.String())
}
