package session

import (
	"container/list"
	"context"
	"sync"
	"time"

	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/transport"
)

// A session whose browser is between connections has no live connection
// anywhere: when Redis restarts empty then, nothing would write it back and
// its resume would be refused (4004). So each node keeps a copy of every
// session whose connection ended here in the last IdleTimeout (a browser
// away longer than that would have been closed 4104 anyway), within
// RecentSessionsBytes of history (its JSON, as the session bounds it), the
// oldest dropped first, and writes them back on the same signal that
// restores its live sessions (watcher.Check).

// recentCopy is a session as its last connection on this node left it.
type recentCopy struct {
	rec     store.Record
	hist    []transport.Entry
	pending []orchestrator.Confirmation
	block   store.Block // the user's, as the connection knew it
	bytes   int         // the history's JSON size
	at      time.Time   // when the connection ended
}

// recentSessions holds the copies, oldest first; safe for concurrent use.
type recentSessions struct {
	max int // bytes of history held, at most
	ttl time.Duration
	now func() time.Time

	mu    sync.Mutex
	order list.List // of *recentCopy, oldest first
	byID  map[string]*list.Element
	bytes int
}

func newRecentSessions(maxBytes int, ttl time.Duration, now func() time.Time) *recentSessions {
	return &recentSessions{max: maxBytes, ttl: ttl, now: now, byID: map[string]*list.Element{}}
}

// keep stores the copy of a session whose connection just ended, replacing
// an older copy of it; sizes are the history entries' JSON sizes, block
// the user's block as the connection knew it.
func (r *recentSessions) keep(rec store.Record, hist []transport.Entry, sizes []int, pending []orchestrator.Confirmation,
	block store.Block) {
	if r.max <= 0 || r.ttl <= 0 || rec.ID == "" {
		return
	}
	n := 0
	for _, s := range sizes {
		n += s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.byID[rec.ID]; ok {
		r.removeLocked(e)
	}
	if n > r.max {
		return
	}
	r.byID[rec.ID] = r.order.PushBack(&recentCopy{rec: rec, hist: hist, pending: pending, block: block, bytes: n,
		at: r.now()})
	r.bytes += n
	for r.bytes > r.max {
		r.removeLocked(r.order.Front())
	}
}

// forget drops the copy of id when epoch, a newer owner, took the session
// (on any node): this copy is then stale.
func (r *recentSessions) forget(id string, epoch int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.byID[id]; ok && e.Value.(*recentCopy).rec.Epoch < epoch {
		r.removeLocked(e)
	}
}

// current drops the copies older than the TTL and returns the others.
func (r *recentSessions) current() []*recentCopy {
	r.mu.Lock()
	defer r.mu.Unlock()
	cutoff := r.now().Add(-r.ttl)
	for e := r.order.Front(); e != nil && !e.Value.(*recentCopy).at.After(cutoff); e = r.order.Front() {
		r.removeLocked(e)
	}
	out := make([]*recentCopy, 0, r.order.Len())
	for e := r.order.Front(); e != nil; e = e.Next() {
		out = append(out, e.Value.(*recentCopy))
	}
	return out
}

func (r *recentSessions) removeLocked(e *list.Element) {
	rc := e.Value.(*recentCopy)
	delete(r.byID, rc.rec.ID)
	r.bytes -= rc.bytes
	r.order.Remove(e)
}

// restoreRecent writes back the recent copies, not live on this node, whose
// record Redis no longer has; a copy that a newer owner replaced is
// dropped. It runs on the watcher after the live sessions' check.
func (m *Manager) restoreRecent() {
	copies := m.recent.current()
	m.mu.Lock()
	kept := copies[:0]
	for _, rc := range copies {
		if m.live[rc.rec.ID] == nil {
			kept = append(kept, rc)
		}
	}
	m.mu.Unlock()
	if len(kept) == 0 {
		return
	}
	ids := make([]string, len(kept))
	for i, rc := range kept {
		ids[i] = rc.rec.ID
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.StoreTimeout)
	epochs, err := m.Store.Epochs(ctx, ids)
	cancel()
	if err != nil {
		return // Redis failed again; the next check comes
	}
	for i, rc := range kept {
		switch e := epochs[i]; {
		case e > rc.rec.Epoch:
			m.recent.forget(rc.rec.ID, e)
		case e == 0:
			ctx, cancel := context.WithTimeout(context.Background(), m.cfg.StoreTimeout)
			restored, err := m.Store.Restore(ctx, rc.rec, rc.hist, rc.pending)
			switch {
			case err != nil:
				m.Log.Warn("could not write back a recent session to a store that had lost it; the next check retries",
					"session", rc.rec.ID, "err", err)
			case restored:
				m.Metrics.StoreRestorations.Inc()
				m.Log.Info("session written back to a store that had lost it", "session", rc.rec.ID,
					"between_connections", true, "ended_ago", m.now().Sub(rc.at).Round(time.Second).String())
				m.restoreBlock(ctx, rc.rec.UserID, rc.block)
			}
			cancel()
		}
	}
}
