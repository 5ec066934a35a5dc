package session

import (
	"context"
	"time"

	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/timeline"
	"github.com/turnstile-gw/turnstile/transport"
)

// A session's timeline is recorded as its turns run (timeline.Recorder,
// fed by the turn loops and the tool events) and written with each turn's
// end, in the round trip that stores the turn (store.EndTurn); events
// between turns wait for the next write, or for the connection's end
// (store.Leave). Nothing of it runs per audio frame.

// timeline is the session's timeline recorder, made at its first event
// (a turn, a tool call, a session event, the close) once the session is
// ready, so that an idle session holds none (with its turn map and the
// user's pseudonym, about 0.2 KiB); nil before ready, when nothing is
// recorded.
func (s *session) timeline() *timeline.Recorder {
	if r := s.tl.Load(); r != nil || !s.started.Load() {
		return r
	}
	r := timeline.NewRecorder(s.st.record().ID, s.m.Pseudonym(s.id.User), s.m.cfg.Node, s.m.cfg.Clock.Now)
	if !s.tl.CompareAndSwap(nil, r) {
		r = s.tl.Load()
	}
	return r
}

// storeTurnEnd queues a turn's end: entries for the history (in it by the
// append mark mark), the turn's timeline entry (when ok) and the events
// waiting, and the user's block read back. A block set on another node meanwhile applies here.
func (s *session) storeTurnEnd(entries []transport.Entry, mark uint64, t timeline.Turn, ok bool) {
	var turn func() []byte
	if ok {
		turn = func() []byte { return marshalEntry(s, t) }
	}
	s.pst.writeAsync(s.endTurn(entries, mark, turn))
}

// endTurn is the store write of entries (in the history by the append
// mark mark), the turn's timeline entry (turn, if any) and the events
// waiting, applying the user's block it reads back (one set on another
// node meanwhile): a turn's end (storeTurnEnd, asynchronous) and an entry
// no model turn made (keep, waited for).
func (s *session) endTurn(entries []transport.Entry, mark uint64, turn func() []byte) func(context.Context, store.Record) error {
	return func(ctx context.Context, rec store.Record) error {
		end := store.TurnEnd{Entries: s.pst.uncovered(mark, entries), Events: s.takeEvents()}
		if turn != nil {
			end.Turn = turn()
		}
		b, err := s.m.Store.EndTurn(ctx, rec, end)
		if err == nil && s.m.now().Before(b.Until) {
			s.setBlocked(b)
		}
		return err
	}
}

// takeEvents returns the events waiting, as JSON.
func (s *session) takeEvents() [][]byte {
	evs := s.tl.Load().TakeEvents() // none before the first event
	out := make([][]byte, 0, len(evs))
	for _, ev := range evs {
		if b := marshalEntry(s, ev); b != nil {
			out = append(out, b)
		}
	}
	return out
}

func marshalEntry(s *session, v any) []byte {
	b, err := store.MarshalJSON(v)
	if err != nil {
		s.log().Error("cannot encode a timeline entry", "err", err)
		return nil
	}
	return b
}

// event notes a session event at the current turn.
func (s *session) event(ev timeline.Event) {
	ev.Turn = s.st.record().Turn
	s.timeline().Event(ev)
}

// leave is the connection's last word in the store: its close on the
// timeline (fenced: a connection that lost its session writes nothing
// there) and the session out of the live index.
func (s *session) leave(d protocol.Disconnect) {
	rec := s.st.record()
	if rec.ID == "" || !s.started.Load() {
		return
	}
	s.event(timeline.Event{Event: timeline.EventClose, Reason: d.Label, Code: d.Code})
	ctx, cancel := context.WithTimeout(context.Background(), s.m.cfg.StoreTimeout)
	defer cancel()
	if err := s.m.Store.Leave(ctx, rec, s.m.cfg.Node, s.takeEvents()); err != nil {
		s.log().Warn("could not record the session's close", "err", err)
	}
}

// DefaultLiveTTL is how long a node's claim on a live session counts in
// the live index without renewal; it renews three times per TTL.
const DefaultLiveTTL = 30 * time.Second

// presence keeps this node's live sessions in the store's live index
// until ctx ends: every third of LiveTTL all of them, and a session that
// starts here at once, alone (kickPresence): a ramp of starts writes each
// new session once, not the whole index per start (a round trip per
// markLiveBatch of sessions). The renewal goes by the session's clock
// (Config.Clock), as the live index's TTL does in the store's eyes.
func (m *Manager) presence(ctx context.Context) {
	every := m.cfg.LiveTTL / 3
	tick := make(chan struct{}, 1)
	wake := func() {
		select {
		case tick <- struct{}{}:
		default:
		}
	}
	t := m.cfg.Clock.AfterFunc(every, wake)
	defer func() { t.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			t = m.cfg.Clock.AfterFunc(every, wake)
			m.markLive(ctx, m.liveIDs())
		case <-m.liveKick:
			m.mu.Lock()
			fresh, all := m.liveNew, m.liveAll
			m.liveNew, m.liveAll = nil, false
			m.mu.Unlock()
			if all {
				m.markLive(ctx, m.liveIDs())
			} else if ids := m.stillLive(fresh); len(ids) > 0 {
				m.markLive(ctx, ids)
			}
		}
	}
}

// liveIDs lists the sessions started and live here.
func (m *Manager) liveIDs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]string, 0, len(m.live))
	for id, s := range m.live {
		if s.started.Load() {
			ids = append(ids, id)
		}
	}
	return ids
}

// stillLive keeps of ids (in place) the sessions still live here.
func (m *Manager) stillLive(ids []string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	kept := ids[:0]
	for _, id := range ids {
		if s := m.live[id]; s != nil && s.started.Load() {
			kept = append(kept, id)
		}
	}
	return kept
}

// liveNewMax bounds the sessions kickPresence keeps for the presence loop.
const liveNewMax = 512

// markLive writes ids into the live index for LiveTTL.
func (m *Manager) markLive(ctx context.Context, ids []string) {
	sctx, cancel := context.WithTimeout(ctx, m.cfg.StoreTimeout)
	defer cancel()
	if err := m.Store.MarkLive(sctx, m.cfg.Node, ids, m.cfg.LiveTTL); err != nil && ctx.Err() == nil {
		m.Log.Warn("could not renew this node's live sessions in the store", "err", err)
	}
}

// kickPresence asks the presence loop to write session id into the live
// index now. Past liveNewMax sessions waiting (a burst, or no loop
// running) it asks for all of them instead of holding more ids.
func (m *Manager) kickPresence(id string) {
	m.mu.Lock()
	if len(m.liveNew) < liveNewMax {
		m.liveNew = append(m.liveNew, id)
	} else {
		m.liveNew, m.liveAll = nil, true
	}
	m.mu.Unlock()
	select {
	case m.liveKick <- struct{}{}:
	default:
	}
}

// Pseudonym is the pseudonym of user, as traces show it too
// (Config.Pseudonyms).
func (m *Manager) Pseudonym(user string) string { return m.cfg.Pseudonyms.Of(user) }

// operatorClosed ends the connection because an operator closed its
// session (on any node).
func (s *session) operatorClosed() {
	if s.out.closeWith(protocol.DisconnectOperatorClosed) {
		s.m.Log.Warn("session closed by an operator", "session", s.st.record().ID)
	}
	s.act.cancelTurn()
}

// blockChanged applies a block set (by an operator, or by the model on any
// node) or lifted (by an operator) to this node's connections of user:
// announced, the block set; nil (a lift, or a node of an earlier version
// announcing a block without it), the block read from the store. A
// connection that has that block already is left as it is.
func (m *Manager) blockChanged(user string, announced *store.Block) {
	sessions := m.sessionsOf(user)
	if len(sessions) == 0 {
		return // none here to tell
	}
	var b store.Block
	if announced != nil {
		b = *announced
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), m.cfg.StoreTimeout)
		defer cancel()
		var err error
		if b, err = m.Store.BlockOf(ctx, user); err != nil {
			m.Log.Warn("could not read a user's block after an operator changed it", "err", err)
			return
		}
	}
	for _, s := range sessions {
		if s.st.currentBlock().Until.Equal(b.Until) {
			continue // known here (blockLocal, or a second message)
		}
		s.st.liftBlock() // an operator may shorten a block
		if m.now().Before(b.Until) {
			s.setBlocked(b)
		}
	}
}
