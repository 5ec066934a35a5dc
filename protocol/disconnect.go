package protocol

import (
	"fmt"
	"time"
)

// Disconnect is one way a browser connection ends: the close code and
// reason the browser gets (Code 0: the gateway sends no close frame because
// the connection is already gone) and the label the
// turnstile_browser_disconnects_total metric and the logs use. The set is
// closed: every end of a connection is one of the values below, so close
// frames, metrics and logs cannot drift apart.
type Disconnect struct {
	Code   int
	Reason string // ≤ 123 bytes, as a close frame allows
	Label  string
}

// Reconnect reports whether the client should reconnect and resume
// (4100–4199) rather than give up (4000–4099).
func (d Disconnect) Reconnect() bool { return d.Code >= 4100 && d.Code <= 4199 }

// RetryAfterReason is how a 4008 close's reason ends when the user may not
// reconnect for a while: "…; retry after N s" (docs/protocol.md).
const RetryAfterReason = "; retry after %d s"

// WithRetryAfter is d with its reason telling the client to wait wait
// (whole seconds, rounded up, at least 1) before it connects again.
func (d Disconnect) WithRetryAfter(wait time.Duration) Disconnect {
	d.Reason += fmt.Sprintf(RetryAfterReason, RetryAfterSeconds(wait))
	return d
}

// RetryAfterSeconds is wait in whole seconds, rounded up, at least 1: a
// client that waits that long finds the wait over (the close reason's and
// the HTTP Retry-After's).
func RetryAfterSeconds(wait time.Duration) int64 {
	return max(int64((wait+time.Second-1)/time.Second), 1)
}

// The ways a connection ends.
var (
	// The browser went away, or its connection broke.
	DisconnectClientClosed  = Disconnect{Label: "client_closed"}
	DisconnectReadFailed    = Disconnect{Label: "read_failed"}
	DisconnectWriteFailed   = Disconnect{Label: "write_failed"}
	DisconnectMessageTooBig = Disconnect{Label: "message_too_big"}

	// Terminal: the client must not simply reconnect.
	DisconnectProtocolViolation = Disconnect{CloseProtocolViolation, "protocol violation", "protocol_violation"}
	DisconnectHandshakeTimeout  = Disconnect{CloseProtocolViolation, "no session.start in time", "handshake_timeout"}
	DisconnectBlocked           = Disconnect{CloseBlocked, "blocked", "blocked"}
	DisconnectResumeRefused     = Disconnect{CloseResumeRefused, "resume refused", "resume_refused"}
	DisconnectTakenOver         = Disconnect{CloseTakenOver, "session resumed by another connection", "taken_over"}
	DisconnectUnauthenticated   = Disconnect{CloseUnauthenticated, "unauthenticated", "unauthenticated"}
	DisconnectTokenExpired      = Disconnect{CloseUnauthenticated, "token expired: reconnect with a fresh token", "token_expired"}
	DisconnectRateAbuse         = Disconnect{CloseRateAbuse, "rate limits exceeded for too long", "rate_abuse"}
	DisconnectNewSessions       = Disconnect{CloseRateAbuse, "too many new sessions: try again later", "new_sessions_per_minute"}
	DisconnectResumes           = Disconnect{CloseRateAbuse, "too many resumes: try again later", "resumes_per_minute"}
	DisconnectInvalidUTF8       = Disconnect{CloseInvalidData, "a text frame is not valid UTF-8", "invalid_utf8"}
	// An operator ended the session (POST /admin/sessions/{id}/close): it
	// cannot be resumed.
	DisconnectOperatorClosed = Disconnect{CloseOperatorClosed, "ended by the operator: do not reconnect", "operator_closed"}

	// Reconnect and resume.
	DisconnectDraining         = Disconnect{CloseDraining, "server draining: reconnect and resume", "draining"}
	DisconnectTooSlow          = Disconnect{CloseTooSlow, "too slow: reconnect and resume", "too_slow"}
	DisconnectUpstreamLost     = Disconnect{CloseUpstreamLost, "upstream lost: reconnect and resume", "upstream_lost"}
	DisconnectStoreUnavailable = Disconnect{CloseStoreUnavailable, "state store unavailable", "store_unavailable"}
	DisconnectIdle             = Disconnect{CloseIdle, "idle: reconnect and resume", "idle"}
	// DisconnectRestoring: a resume of a session that Redis lost and the
	// nodes are writing back (Redis restarted empty): retry shortly.
	DisconnectRestoring = Disconnect{CloseStoreUnavailable, "session being restored: reconnect and resume", "restoring"}
)

// Disconnects lists every Disconnect, for metrics initialised at zero.
var Disconnects = []Disconnect{
	DisconnectClientClosed, DisconnectReadFailed, DisconnectWriteFailed, DisconnectMessageTooBig,
	DisconnectProtocolViolation, DisconnectHandshakeTimeout, DisconnectBlocked, DisconnectResumeRefused,
	DisconnectTakenOver, DisconnectUnauthenticated, DisconnectTokenExpired, DisconnectRateAbuse, DisconnectNewSessions,
	DisconnectResumes,
	DisconnectInvalidUTF8, DisconnectOperatorClosed,
	DisconnectDraining, DisconnectTooSlow, DisconnectUpstreamLost, DisconnectStoreUnavailable, DisconnectIdle,
	DisconnectRestoring,
}
