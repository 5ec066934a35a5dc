package session

import (
	"sync"
	"time"

	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/transport"
)

// state is a session's durable state as this connection holds it: the
// record, the history, and the user's block. It is the one owner of these
// fields; every access goes through its methods, under its one lock.
type state struct {
	historyMax int
	now        func() time.Time

	mu      sync.Mutex
	rec     store.Record
	history []transport.Entry
	turns   int // turns taken on this connection
	block   store.Block
}

// record returns a copy of the record.
func (s *state) record() store.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec
}

// snapshot returns the record and a copy of the history.
func (s *state) snapshot() (store.Record, []transport.Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec, append([]transport.Entry(nil), s.history...)
}

// historyCopy returns a copy of the history.
func (s *state) historyCopy() []transport.Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]transport.Entry(nil), s.history...)
}

// load replaces the state with what the store returned.
func (s *state) load(rec store.Record, hist []transport.Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rec, s.history = rec, trimHistory(hist, s.historyMax)
}

// update changes the record under the lock.
func (s *state) update(f func(rec *store.Record)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.rec)
}

// mode is the session's mode.
func (s *state) mode() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec.Mode
}

// beginTurn starts the next turn: its number, and the pending message it
// takes with it (SET_PENDING_MESSAGE, delivered once). user is the turn's
// user entry (nil for a voice turn, whose input is known at its end).
func (s *state) beginTurn(user *transport.Entry, takePending bool) (turn int, note string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rec.Turn++
	s.turns++
	if takePending {
		note, s.rec.PendingMessage = s.rec.PendingMessage, ""
	}
	if user != nil {
		user.Turn = s.rec.Turn
		s.history = trimHistory(append(s.history, *user), s.historyMax)
	}
	return s.rec.Turn, note
}

// undoTurn takes back the turn beginTurn just started (the input was
// refused after all): its user entry leaves the history, its note returns.
func (s *state) undoTurn(note string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rec.Turn--
	s.turns--
	if n := len(s.history); n > 0 {
		s.history = s.history[:n-1]
	}
	s.rec.PendingMessage = note
}

// takePending returns and clears the pending message.
func (s *state) takePending() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	note := s.rec.PendingMessage
	s.rec.PendingMessage = ""
	return note
}

// append adds entries to the history.
func (s *state) append(entries []transport.Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.history = trimHistory(append(s.history, entries...), s.historyMax)
}

// setBlock records a block; it reports false when it changes nothing (an
// earlier block lasts at least as long).
func (s *state) setBlock(b store.Block) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !b.Until.After(s.block.Until) {
		return false
	}
	s.block = b
	return true
}

// blocked reports whether input is refused now, and until when.
func (s *state) blocked() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.block.Until, s.now().Before(s.block.Until)
}

// turnsTaken is how many turns this connection took.
func (s *state) turnsTaken() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turns
}
