package session

import (
	"context"
	"crypto/subtle"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/store"
)

// One owner per session: a resume takes the next epoch in the store, and
// every write carries the writer's epoch, so that a connection that lost
// the session cannot write to it any more (its write is refused: fenced).
// The store announces each new owner to every node (Watch); a node closes
// its older connection of that session at once (4005), even when idle.
// The epoch a connection learns before its own is known (a resume racing
// another) is kept and compared when its own arrives (ownership.go).

// watcher is the manager as the store's Watch sees it.
type watcher struct{ m *Manager }

// Owner: a resume made epoch the owner of the session.
func (w watcher) Owner(id string, epoch int64) {
	w.m.recent.forget(id, epoch)
	for _, s := range w.m.holders(id) {
		s.ownerSeen(epoch)
	}
}

// Closed: an operator closed the session.
func (w watcher) Closed(id string) {
	if s := w.m.holder(id); s != nil {
		s.operatorClosed()
	}
}

// BlockChanged: the user's block was set or lifted.
func (w watcher) BlockChanged(user string, b *store.Block) { w.m.blockChanged(user, b) }

// Check compares every live session with the store: one whose record is
// gone (Redis restarted empty or was flushed), or stale, or whose writes
// failed is written back whole; one that another connection owns now is
// closed. Then the recent sessions, between connections, get the same
// (restoreRecent).
func (w watcher) Check() {
	w.m.storeChecked()
	w.checkLive()
	w.m.restoreRecent()
}

// Lost: Redis lost its data; Check follows.
func (w watcher) Lost() { w.m.storeLost() }

func (w watcher) checkLive() {
	m := w.m
	m.mu.Lock()
	var live []*session
	var ids []string
	for id, s := range m.live {
		if s.owner.epoch() != 0 {
			live, ids = append(live, s), append(ids, id)
		}
	}
	m.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.StoreTimeout)
	defer cancel()
	epochs, err := m.Store.Epochs(ctx, ids)
	if err != nil {
		return // Redis failed again; the next check comes
	}
	for i, s := range live {
		switch e, own := epochs[i], s.owner.epoch(); {
		case e > own:
			s.ownerSeen(e)
		case e < own || s.pst.needsRestore():
			// Gone (0), or written back by an older owner that had not heard
			// of this one yet, or behind after failed writes.
			s.pst.restoreSoon()
		}
	}
}

// ownerSeen notes that epoch owns the connection's session; an epoch newer
// than the connection's own ends it.
func (s *session) ownerSeen(epoch int64) {
	if s.owner.announce(epoch) {
		s.takenOver()
	}
}

// takenOver ends the connection, and its running turn, because a newer
// owner was announced (ownerSeen) or a write of the session (a call ledger
// or confirmation write of the orchestrator, a confirmation answer) was
// refused for one.
func (s *session) takenOver() {
	s.fence()
	s.act.cancelTurn()
}

// owned records the connection's own epoch once its session is loaded; it
// reports false (and ends the connection) when a newer one was already
// announced.
func (s *session) owned(epoch int64) bool {
	if !s.owner.take(epoch) {
		s.fence()
		return false
	}
	return true
}

// fence ends the connection because another connection owns its session
// now (4005); its store writes are refused from now on, and its running
// turn ends with the connection. It takes no lock but the closer's: the
// persister calls it while a turn's start may hold the activity's.
func (s *session) fence() {
	if s.out.closeWith(protocol.DisconnectTakenOver) {
		// The node's logger: s.log() is the connection's own until its
		// session is ready, and this runs on the node's watcher.
		s.m.Log.Info("session resumed by another connection; closing this one", "session", s.st.record().ID)
	}
}

// owns reports whether token resumes this connection's session for user,
// judged on the token digest the connection holds (in constant time).
func (s *session) owns(token, user string) bool {
	rec := s.st.record()
	want := rec.TokenHash
	got := store.HashToken(token)
	return want != "" && s.id.User == user && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// takeOver closes the session's connection because another one resumed
// the session, and returns when it has ended (its turn cancelled, its store writes
// landed) or after TakeoverWait, so that the new connection reads
// everything the old one wrote.
func (s *session) takeOver(ctx context.Context) {
	s.close(protocol.DisconnectTakenOver)
	s.act.cancelTurn()
	select {
	case <-s.out.ended():
	case <-ctx.Done():
	case <-clock.Wall.After(s.m.cfg.TakeoverWait):
	}
}
