package orchestrator

import (
	"context"
	"errors"
	"sync"
)

// CallState is where a call is in its life. The machine:
//
//	received → refused | running | cancelled | replayed
//	running  → done | timed_out | cancelled
//	refused | done | timed_out | replayed → answered
//
// cancelled and answered are final: a cancelled call is never answered, and
// an answered call is never answered again. replayed is a call whose ID the
// session had already answered (on any node): it is answered again from
// the durable ledger with the same response and never runs.
type CallState string

const (
	StateReceived  CallState = "received"
	StateRefused   CallState = "refused"
	StateRunning   CallState = "running"
	StateDone      CallState = "done"
	StateTimedOut  CallState = "timed_out"
	StateCancelled CallState = "cancelled"
	StateAnswered  CallState = "answered"
	StateReplayed  CallState = "replayed"
	// StateClaimed is a durable record's state between the claim and the
	// answer: the call ran, or was running, somewhere.
	StateClaimed CallState = "claimed"
)

var transitions = map[CallState][]CallState{
	StateReceived: {StateRefused, StateRunning, StateCancelled, StateReplayed},
	StateRunning:  {StateDone, StateTimedOut, StateCancelled},
	StateRefused:  {StateAnswered},
	StateDone:     {StateAnswered},
	StateTimedOut: {StateAnswered},
	StateReplayed: {StateAnswered},
}

// CallRecord is what the durable ledger keeps of one call of a session.
type CallRecord struct {
	ID         string    `json:"id"`
	Tool       string    `json:"tool"`
	Turn       int       `json:"turn"`
	State      CallState `json:"state"`             // claimed, then answered
	Outcome    string    `json:"outcome,omitempty"` // "ok" or the error type, once answered
	ArgsDigest string    `json:"argsDigest,omitempty"`
	DurationMs int64     `json:"durationMs,omitempty"`
	Empty      bool      `json:"empty,omitempty"` // an empty result (loop detection)
	// IdempotencyKey is the key of an action tool's call that ran; a
	// success is found by it (LedgerStore.Succeeded).
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// Response is exactly what the model was sent, once answered.
	Response map[string]any `json:"response,omitempty"`
}

// LedgerStore keeps a session's call records durably, so that a call ID is
// run at most once per session whichever node sees it. Each method is one
// round trip for all the calls of one model message. Each write carries
// the writer's epoch (Session.Epoch) and is refused, changing nothing, with
// ErrFenced when a newer one owns the session.
type LedgerStore interface {
	// Claim records the calls as claimed before any of them runs. For an
	// ID the session had claimed before, it records nothing and returns
	// that call's record instead, keyed by ID.
	Claim(ctx context.Context, sessionID string, epoch int64, calls []CallRecord) (map[string]CallRecord, error)
	// Answer records calls as answered, each with the response the model
	// was sent. A successful call with an IdempotencyKey is recorded as
	// that key's success, unless the key has one already.
	Answer(ctx context.Context, sessionID string, epoch int64, calls []CallRecord) error
	// Succeeded returns the record of the session's successful call with
	// this idempotency key, and false when there is none (kept as long as
	// the call's record).
	Succeeded(ctx context.Context, sessionID, key string) (CallRecord, bool, error)
}

// ErrFenced is returned by a LedgerStore or ConfirmStore write whose epoch
// is older than the session's: another connection owns the session now
// (it was resumed there). Nothing was written, and the writer's connection
// must end. It is store.ErrFenced.
var ErrFenced = errors.New("session owned by a newer connection")

// ledger is one turn's in-memory call ledger keyed by call ID.
type ledger struct {
	mu    sync.Mutex
	calls map[string]*ledgerEntry
}

type ledgerEntry struct {
	state  CallState
	cancel context.CancelFunc // set while running
	record CallRecord         // the durable record, once the call has an answer
}

// receive registers a new call; false means the ID was seen before in this
// turn (a duplicate, which is never processed or answered).
func (l *ledger) receive(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls == nil {
		l.calls = map[string]*ledgerEntry{}
	}
	if _, dup := l.calls[id]; dup {
		return false
	}
	l.calls[id] = &ledgerEntry{state: StateReceived}
	return true
}

// move makes one transition; false when it is not allowed from the current
// state (for instance the call was cancelled meanwhile).
func (l *ledger) move(id string, to CallState) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.moveLocked(id, to)
}

func (l *ledger) moveLocked(id string, to CallState) bool {
	e, ok := l.calls[id]
	if !ok {
		return false
	}
	for _, next := range transitions[e.state] {
		if next == to {
			e.state = to
			if to != StateRunning {
				e.cancel = nil
			}
			return true
		}
	}
	return false
}

// start moves a call to running with its cancel function; false when it was
// cancelled before it could start.
func (l *ledger) start(id string, cancel context.CancelFunc) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.moveLocked(id, StateRunning) {
		return false
	}
	l.calls[id].cancel = cancel
	return true
}

// cancel cancels a received or running call; false when it had already
// finished (its answer stands) or is unknown.
func (l *ledger) cancel(id string) bool {
	l.mu.Lock()
	e, ok := l.calls[id]
	if !ok {
		l.mu.Unlock()
		return false
	}
	cancel := e.cancel // moveLocked clears it
	if !l.moveLocked(id, StateCancelled) {
		l.mu.Unlock()
		return false
	}
	l.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return true
}

func (l *ledger) state(id string) CallState {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.calls[id]; ok {
		return e.state
	}
	return ""
}

// ids returns every call ID of the turn.
func (l *ledger) ids() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.calls))
	for id := range l.calls {
		out = append(out, id)
	}
	return out
}

// setRecord keeps the record the durable ledger gets when the call is
// answered.
func (l *ledger) setRecord(id string, rec CallRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.calls[id]; ok {
		e.record = rec
	}
}

// answer moves a call to answered and returns its durable record; false
// when it may not be answered (cancelled, unknown, or answered already).
func (l *ledger) answer(id string) (CallRecord, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.moveLocked(id, StateAnswered) {
		return CallRecord{}, false
	}
	rec := l.calls[id].record
	rec.State = StateAnswered
	return rec, true
}
