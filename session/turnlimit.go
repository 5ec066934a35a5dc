package session

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/store"
)

// The user's typed turns per minute (Config.TurnsPerMinute), counted in
// the store across nodes; a refusal is remembered here until it runs out,
// so that a flood does not ask the store again for every message.

// turnLimit is what a typed turn counts against: the user's turns per
// minute (in dev mode, this connection's).
func (a *activity) turnLimit() store.TurnLimit {
	return store.TurnLimit{Key: a.s.limitKey, Max: a.s.m.cfg.TurnsPerMinute, Window: time.Minute}
}

// turnsUsedUp refuses a typed turn while the store said the user's turns
// per minute are used up; it tells the browser.
func (a *activity) turnsUsedUp(now time.Time) bool {
	a.mu.Lock()
	until := a.turnsUntil
	a.mu.Unlock()
	if now.Before(until) {
		a.refuseTurn(until.Sub(now))
		return true
	}
	return false
}

// refuseTurn tells the browser that its turn was refused for the turn
// limit, and for how long.
func (a *activity) refuseTurn(wait time.Duration) {
	a.s.refused(limitTurns, a.s.m.now())
	a.s.send(protocol.NewError(protocol.CodeRateLimited,
		fmt.Sprintf("too many messages in the last minute; try again in %d s", protocol.RetryAfterSeconds(wait)), true, 0))
}

// allowVoiceText counts a text typed in voice against the turn limit (one
// round trip; a store that does not answer lets it through).
func (a *activity) allowVoiceText() bool {
	s := a.s
	lim := a.turnLimit()
	if lim.Max <= 0 {
		return true
	}
	now := s.m.now()
	if a.turnsUsedUp(now) {
		return false
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.m.cfg.StoreTimeout)
	defer cancel()
	rec := s.st.record()
	// The member only has to be unique: the connection's epoch (each
	// connection that owns the session has its own) and its count of texts
	// typed in voice.
	member := rec.ID + ":voice:" + strconv.FormatInt(rec.Epoch, 36) + ":" + strconv.FormatUint(a.voiceTexts.Add(1), 36)
	allowed, wait, err := s.m.Store.CountTurn(ctx, lim, member)
	if err != nil || allowed {
		return true
	}
	a.mu.Lock()
	a.turnsUntil = now.Add(wait)
	a.mu.Unlock()
	a.refuseTurn(wait)
	return false
}
