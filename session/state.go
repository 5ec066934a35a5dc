package session

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/transport"
)

// state is a session's durable state as this connection holds it: the
// record (its epoch and token digest included), the history, the pending
// confirmations and the user's block — everything a node needs to write
// the session back whole when Redis lost it. It is the one owner of these
// fields; every access goes through its methods, under its one lock.
type state struct {
	historyMax      int
	historyMaxBytes int // 0: no bound
	now             func() time.Time
	// trimmed hears how many entries the byte bound dropped (called under
	// the lock: it must not call back into state).
	trimmed func(n int)

	mu      sync.Mutex
	rec     store.Record
	history []transport.Entry
	sizes   []int // each history entry's JSON size in bytes
	chars   []int // and in characters
	turns   int   // turns taken on this connection
	block   store.Block
	// blockSet says a block is recorded (in force or expired): without one
	// blocked answers from it alone, with no lock nor clock read — the
	// browser's reader asks for every microphone frame. Stored under mu.
	blockSet atomic.Bool
	pending  map[string]orchestrator.Confirmation // by token
	// appended counts every entry ever added to the history (it never goes
	// down): a store write of entries knows by it whether a restore that
	// ran since wrote them already (persister.uncovered).
	appended uint64
}

// record returns a copy of the record.
func (s *state) record() store.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec
}

// snapshot returns the record, a copy of the history, the pending
// confirmations, and the append mark the history is at.
func (s *state) snapshot() (store.Record, []transport.Entry, []orchestrator.Confirmation, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pending := make([]orchestrator.Confirmation, 0, len(s.pending))
	for _, p := range s.pending {
		pending = append(pending, p)
	}
	return s.rec, append([]transport.Entry(nil), s.history...), pending, s.appended
}

// appendMark is the count of entries ever added to the history.
func (s *state) appendMark() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appended
}

// historyCopy returns a copy of the history.
func (s *state) historyCopy() []transport.Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]transport.Entry(nil), s.history...)
}

// greeting is the profile's greeting the history opens with, "" none
// (greeting.go).
func (s *state) greeting() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, _ := splitGreeting(s.history)
	return g
}

// historyAndSizes returns a copy of the history and its entries' JSON
// sizes in bytes.
func (s *state) historyAndSizes() ([]transport.Entry, []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]transport.Entry(nil), s.history...), append([]int(nil), s.sizes...)
}

// historyAndChars returns a copy of the history and its entries' JSON
// sizes in characters.
func (s *state) historyAndChars() ([]transport.Entry, []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]transport.Entry(nil), s.history...), append([]int(nil), s.chars...)
}

// load replaces the state with what the store returned.
func (s *state) load(rec store.Record, hist []transport.Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rec, s.history, s.sizes, s.chars = rec, nil, nil, nil
	s.appendLocked(hist)
}

// appendLocked adds entries and bounds the history.
func (s *state) appendLocked(entries []transport.Entry) {
	s.appended += uint64(len(entries))
	for _, e := range entries {
		s.history = append(s.history, e)
		bytes, chars := entrySize(e)
		s.sizes, s.chars = append(s.sizes, bytes), append(s.chars, chars)
	}
	start, bySize := historyStart(s.history, s.sizes, s.historyMax, s.historyMaxBytes)
	if start == 0 {
		return
	}
	if bySize && s.trimmed != nil {
		s.trimmed(start)
	}
	n := copy(s.history, s.history[start:])
	clear(s.history[n:])
	s.history = s.history[:n]
	s.sizes = s.sizes[:copy(s.sizes, s.sizes[start:])]
	s.chars = s.chars[:copy(s.chars, s.chars[start:])]
}

// update changes the record under the lock.
func (s *state) update(f func(rec *store.Record)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.rec)
}

// mode is the session's mode.
func (s *state) mode() protocol.Mode {
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
		s.appendLocked([]transport.Entry{*user})
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
		s.history[n-1] = transport.Entry{}
		s.history, s.sizes, s.chars = s.history[:n-1], s.sizes[:n-1], s.chars[:n-1]
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

// append adds entries to the history and returns the append mark after
// them.
func (s *state) append(entries []transport.Entry) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appendLocked(entries)
	return s.appended
}

// addConfirmation keeps a confirmation waiting for the user's answer.
func (s *state) addConfirmation(c orchestrator.Confirmation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		s.pending = map[string]orchestrator.Confirmation{}
	}
	s.pending[c.Token] = c
}

// dropConfirmation forgets an answered (or unknown, or expired) one.
func (s *state) dropConfirmation(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, token)
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
	s.blockSet.Store(true)
	return true
}

// liftBlock forgets the block (an operator lifted or replaced it).
func (s *state) liftBlock() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.block = store.Block{}
	s.blockSet.Store(false)
}

// currentBlock is the block recorded, in force or not.
func (s *state) currentBlock() store.Block {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.block
}

// blocked reports whether input is refused now, and until when.
func (s *state) blocked() (time.Time, bool) {
	if !s.blockSet.Load() {
		return time.Time{}, false // as the zero block answers
	}
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
