package session

import (
	"context"
	"time"

	"github.com/turnstile-gw/turnstile/store"
)

// When Redis restarts empty (or is flushed), every node writes back what
// it holds: its live sessions and those between connections (fence.go,
// recent.go), the active blocks of their users, and its connections'
// per-user leases (the edge, told through OnStoreCheck). Until that is done
// a resume of a session Redis no longer has is told to come back
// (restoring) rather than refused for good.

// restoreGrace is how long after this node learned that Redis lost its
// data a resume of a session missing from it is told to retry (close 4103)
// rather than refused (4004): every node notices the loss within its watch
// interval (1 s) and writes its sessions back within a few round trips,
// and a browser retries after about 0.5, 1, 2 and 4 s; 10 s covers that
// with room on a busy node. A session that really is gone is refused once
// it has passed.
const restoreGrace = 10 * time.Second

// storeLost notes that Redis lost its data (Watch saw this node's marker
// vanish).
func (m *Manager) storeLost() {
	m.lostAt.Store(m.now().UnixNano())
	m.Log.Warn("session store lost its data (Redis restarted empty or was flushed): writing back this node's " +
		"sessions, their users' blocks and its connection leases")
}

// restoring reports whether a session missing from the store may be
// written back any moment: Redis lost its data within restoreGrace of now,
// as this node saw it, or has lost it just now (this node's marker is gone:
// its Watch has not looked yet).
//
// A loss noted within the grace answers at once, without a round trip.
// Otherwise the marker, then lostAt again: the Watch re-sets the marker
// before it calls Lost (which sets lostAt), and the store's MarkerGone says
// gone until Lost has returned, so one of the two sees the loss whenever
// the Watch is in between. An error is the store's: whether it lost the
// session cannot be told.
func (m *Manager) restoring(ctx context.Context) (bool, error) {
	if m.lostRecently() {
		return true, nil
	}
	gone, err := m.Store.MarkerGone(ctx, m.cfg.Node)
	if err != nil || gone {
		return gone, err
	}
	return m.lostRecently(), nil
}

// lostRecently reports whether this node noted a loss within restoreGrace.
func (m *Manager) lostRecently() bool {
	at := m.lostAt.Load()
	return at != 0 && m.now().Sub(time.Unix(0, at)) < restoreGrace
}

// OnStoreCheck registers f to run each time this node compares what it
// holds with the store (Redis answers again, lost its data, or the node's
// subscription was re-established): the edge re-asserts its connection
// leases then. f must not block.
func (m *Manager) OnStoreCheck(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onCheck = append(m.onCheck, f)
}

// storeChecked runs the OnStoreCheck hooks.
func (m *Manager) storeChecked() {
	m.mu.Lock()
	hooks := m.onCheck
	m.mu.Unlock()
	for _, f := range hooks {
		f()
	}
}

// restoreBlock writes back user's block b, if still in force, after the
// store lost it with the session that was just written back.
func (m *Manager) restoreBlock(ctx context.Context, user string, b store.Block) {
	if !m.now().Before(b.Until) {
		return
	}
	if err := m.Store.BlockUser(ctx, user, b); err != nil {
		m.Log.Warn("could not write back a user's block to a store that had lost it; it holds on this node's "+
			"connections", "user", m.Pseudonym(user), "until", b.Until, "err", err)
		return
	}
	m.Log.Info("user block written back to a store that had lost it", "user", m.Pseudonym(user), "until", b.Until)
}
