package session

import (
	"context"
	"time"

	"github.com/turnstile-gw/turnstile/store"
)

// Blocks the model imposes (ignore_user) start short and escalate: the
// n-th block of a user within BlockMemory of the previous one lasts at
// most BlockSteps[n-1] (the last step for every later one), whatever the
// model asked for. A wrongful block — a prompt injection that slipped
// past the orchestrator in an earlier turn — thus costs the user minutes,
// not a day, and an operator's lift (DELETE /admin/users/{id}/block) also
// forgives the count.

// DefaultBlockSteps are the caps of a user's first, second and later
// blocks.
var DefaultBlockSteps = []time.Duration{10 * time.Minute, time.Hour, 24 * time.Hour}

// DefaultBlockMemory is how long a user's blocks count toward escalation
// after the latest one.
const DefaultBlockMemory = 7 * 24 * time.Hour

// blockCap is the longest block allowed as the user's n-th (n ≥ 1).
func blockCap(steps []time.Duration, n int) time.Duration {
	if n < 1 {
		n = 1
	}
	if n > len(steps) {
		n = len(steps)
	}
	return steps[n-1]
}

// block applies BLOCK_USER: the user's input is refused on every session
// and node until the block ends, and new connections are refused (4003).
// The requested length d is capped by the user's strike count.
func (s *session) block(d time.Duration, reason string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), s.m.cfg.StoreTimeout)
	defer cancel()
	strike, err := s.m.Store.Strike(ctx, s.id.User, s.m.cfg.BlockMemory)
	if err != nil {
		// Unknown count: the block is the shortest, never the longest.
		s.log().Warn("could not count the user's blocks; this one gets the first step", "err", err)
		strike = 1
	}
	limit := blockCap(s.m.cfg.BlockSteps, strike)
	requested := d
	d = min(d, limit)
	b := store.Block{Until: s.m.now().Add(d).UTC().Truncate(time.Second), Reason: reason}
	if err := s.m.Store.BlockUser(ctx, s.id.User, b); err != nil {
		// The block still holds on this node's connections of the user.
		s.log().Error("could not store a user block; it holds on this node only", "err", err)
	}
	s.log().Warn("user blocked", "user", s.id.User, "until", b.Until, "reason", b.Reason, "strike", strike,
		"requested_seconds", int64(requested/time.Second), "seconds", int64(d/time.Second))
	s.m.blockLocal(s.id.User, b)
}

// blockLocal tells every session of user on this node about a block;
// sessions on other nodes are told through the store (BlockUser announces
// it; Watcher.BlockChanged), and at the latest at their next turn.
func (m *Manager) blockLocal(user string, b store.Block) {
	for _, s := range m.sessionsOf(user) {
		s.setBlocked(b)
	}
}

// sessionsOf is a snapshot of user's sessions on this node, of the
// connections that have read session.start.
func (m *Manager) sessionsOf(user string) []*session {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*session
	for c := range m.all {
		if s := c.s.Load(); s != nil && c.id.User == user {
			out = append(out, s)
		}
	}
	return out
}
