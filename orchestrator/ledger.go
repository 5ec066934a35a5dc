package orchestrator

import (
	"context"
	"sync"
)

// CallState is where a call is in its life. The machine:
//
//	received → refused | running | cancelled
//	running  → done | timed_out | cancelled
//	refused | done | timed_out → answered
//
// cancelled and answered are final: a cancelled call is never answered, and
// an answered call is never answered again.
type CallState string

const (
	StateReceived  CallState = "received"
	StateRefused   CallState = "refused"
	StateRunning   CallState = "running"
	StateDone      CallState = "done"
	StateTimedOut  CallState = "timed_out"
	StateCancelled CallState = "cancelled"
	StateAnswered  CallState = "answered"
)

var transitions = map[CallState][]CallState{
	StateReceived: {StateRefused, StateRunning, StateCancelled},
	StateRunning:  {StateDone, StateTimedOut, StateCancelled},
	StateRefused:  {StateAnswered},
	StateDone:     {StateAnswered},
	StateTimedOut: {StateAnswered},
}

// CallRecord is what the ledger store keeps of one call.
type CallRecord struct {
	ID         string    `json:"id"`
	Tool       string    `json:"tool"`
	State      CallState `json:"state"`
	Outcome    string    `json:"outcome"` // "ok" or the error type
	ArgsDigest string    `json:"argsDigest,omitempty"`
	DurationMs int64     `json:"durationMs"`
	Empty      bool      `json:"empty,omitempty"` // an empty result (loop detection)
}

// LedgerStore keeps call records durably, one round trip per call.
type LedgerStore interface {
	RecordCall(ctx context.Context, sessionID string, turn int, rec CallRecord) error
}

// ledger is one turn's in-memory call ledger keyed by call ID.
type ledger struct {
	mu    sync.Mutex
	calls map[string]*ledgerEntry
}

type ledgerEntry struct {
	state  CallState
	cancel context.CancelFunc // set while running
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
