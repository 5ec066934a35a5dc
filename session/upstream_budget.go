package session

import (
	"context"
	"fmt"
	"time"

	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/store"
)

// The session's limits counted in the store, across nodes: the
// upstream-connect budget and the resume limits — what bounds the paid
// Live connections one session or user makes the gateway open, whichever
// way they try (voice.start, a resume of a session in voice, an upstream
// goAway or failure) — and the user's new sessions and the session's moves
// into voice per minute. (The connection's own limits, its rates, are in
// limits.go.)

// budgetWindow is the window of the connect budget and the resume limits.
const budgetWindow = time.Minute

// connectBudget is a connection's voice.Budget: every Live open of its
// session takes a place in the session's and the user's windows in Redis
// (one round trip for both). Once refused, the connection refuses further
// opens without asking the store until the windows have room again (the
// wait the store gave: the backoff). A store that does not answer lets the
// open through, as the other limits do.
type connectBudget struct{ s *session }

// AllowConnect takes one Live open for reason.
func (b connectBudget) AllowConnect(reason metrics.ConnectReason) bool {
	s := b.s
	perSession, perUser := s.m.cfg.LiveConnectsPerMinute, s.m.cfg.UserLiveConnectsPerMinute
	if perSession <= 0 && perUser <= 0 {
		return true
	}
	now := s.m.now()
	if until := time.Unix(0, s.connectsUntil.Load()); now.Before(until) {
		b.refuse(reason, until.Sub(now))
		return false
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.m.cfg.StoreTimeout)
	defer cancel()
	allowed, wait, err := s.m.Store.CountLimits(ctx, newSessionID(),
		store.TurnLimit{Key: s.st.record().ID, Kind: store.KindLiveConnects, Max: perSession, Window: budgetWindow},
		store.TurnLimit{Key: s.limitKey, Kind: store.KindUserLiveConnects, Max: perUser, Window: budgetWindow})
	if err != nil || allowed {
		return true
	}
	s.connectsUntil.Store(now.Add(wait).UnixNano())
	b.refuse(reason, wait)
	return false
}

// refuse counts and logs the refusal (throttled per node) and tells the
// browser that the session stays in text, and for how long.
func (b connectBudget) refuse(reason metrics.ConnectReason, wait time.Duration) {
	s := b.s
	s.refused(limitLiveConnects, s.m.now())
	s.send(protocol.NewError(protocol.CodeRateLimited, fmt.Sprintf(
		"too many voice connections for this session or user in the last minute (%s); the conversation stays in text, try voice again in %d s",
		reason, protocol.RetryAfterSeconds(wait)), true, 0))
}

// resumeLimits are the windows a resume of sessionID counts against: the
// session's, kept on the user's tag and keyed by the session ID (only its
// owner can use it up), and the user's.
func (s *session) resumeLimits(sessionID string) []store.TurnLimit {
	return []store.TurnLimit{
		{Key: s.id.User, Kind: store.KindResumes + ":" + sessionID, Max: s.m.cfg.ResumesPerMinute, Window: budgetWindow},
		{Key: s.limitKey, Kind: store.KindResumes, Max: s.m.cfg.UserResumesPerMinute, Window: budgetWindow},
	}
}

// allowResume counts a resume against the session's and the user's resumes
// per minute, across nodes, before the resume takes the session over (a
// refused resume leaves the connection holding it alone); see allowStart.
// It returns the member the resume was counted under, for refundResume.
func (s *session) allowResume(sessionID string) (string, bool) {
	member := newSessionID()
	if s.m.cfg.ResumesPerMinute <= 0 && s.m.cfg.UserResumesPerMinute <= 0 {
		return member, true
	}
	return member, s.allowStart(member, limitResumes, protocol.DisconnectResumes, "resumes", s.resumeLimits(sessionID)...)
}

// refundResume takes back a counted resume that the gateway could not
// serve (the store unavailable, the session being restored): the client
// is told to retry, and its retries must not use up its resumes.
func (s *session) refundResume(sessionID, member string) {
	if s.m.cfg.ResumesPerMinute <= 0 && s.m.cfg.UserResumesPerMinute <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), s.m.cfg.StoreTimeout)
	defer cancel()
	if err := s.m.Store.UncountLimits(ctx, member, s.resumeLimits(sessionID)...); err != nil {
		s.log().Debug("resume limit: could not take back a resume the store did not serve", "err", err)
	}
}

// allowVoiceStart takes one move into voice against the session's starts
// per minute, and tells the browser when it is refused. The window is the
// session's, in Redis: reconnecting and resuming does not reset it. A
// store that does not answer lets the move through.
func (s *session) allowVoiceStart() bool {
	n := s.m.cfg.VoiceStartsPerMinute
	if n <= 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.m.cfg.StoreTimeout)
	defer cancel()
	lim := store.TurnLimit{Key: s.st.record().ID, Kind: store.KindVoiceStarts, Max: n, Window: time.Minute}
	allowed, wait, err := s.m.Store.CountTurn(ctx, lim, newSessionID())
	if err != nil || allowed {
		return true
	}
	s.refused(limitVoiceStarts, s.m.now())
	s.send(protocol.NewError(protocol.CodeRateLimited, fmt.Sprintf(
		"too many switches to voice in the last minute; the session stays in text, try again in %d s", protocol.RetryAfterSeconds(wait)), true, 0))
	return false
}

// allowNewSession counts a new session against the user's new sessions per
// minute, across nodes (resumes do not count); see allowStart. A store
// that does not answer lets it through: creating the session then decides.
func (s *session) allowNewSession() bool {
	n := s.m.cfg.NewSessionsPerMinute
	if n <= 0 {
		return true
	}
	return s.allowStart(newSessionID(), limitNewSessions, protocol.DisconnectNewSessions, "new sessions",
		store.TurnLimit{Key: s.limitKey, Kind: store.KindSessions, Max: n, Window: budgetWindow})
}

// allowStart counts a session's start (new, or a resume) as member against
// lims, across nodes, in one round trip. Over any of them (l), the start is
// refused: the browser is told rate_limited ("too many <what> in the last
// minute; try again in N s") and closed d (4008) with the same wait in its
// reason ("; retry after N s"), the longer of the windows' and the user's
// abuse cooldown, which the 4008 starts (coolDown) as rate abuse's does.
// A store that does not answer lets the start through.
func (s *session) allowStart(member string, l limit, d protocol.Disconnect, what string, lims ...store.TurnLimit) bool {
	ctx, cancel := context.WithTimeout(s.ctx, s.m.cfg.StoreTimeout)
	defer cancel()
	allowed, wait, err := s.m.Store.CountLimits(ctx, member, lims...)
	if err != nil || allowed {
		return true
	}
	s.refused(l, s.m.now())
	s.m.Metrics.RefuseSession(l.String(), s.id.Channel)
	// Starts in a loop are rate abuse: the 4008 starts the user's
	// cooldown like a flood's, on every node.
	_, cooldown := s.m.coolDown(s.ctx, s.id, s.log(), d)
	wait = max(wait, cooldown)
	s.send(protocol.NewError(protocol.CodeRateLimited,
		fmt.Sprintf("too many %s in the last minute; try again in %d s", what, protocol.RetryAfterSeconds(wait)), true, 0))
	s.close(d.WithRetryAfter(wait))
	return false
}
