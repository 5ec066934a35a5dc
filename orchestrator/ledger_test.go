package orchestrator

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// The call state machine of one turn's ledger, every transition.

var allStates = []CallState{StateReceived, StateRefused, StateRunning, StateDone, StateTimedOut, StateCancelled, StateAnswered}

// allowed is the machine as DESIGN §6 and field note 1 require it: every
// call ends in exactly one answer or one cancellation.
var allowed = map[[2]CallState]bool{
	{StateReceived, StateRefused}:   true,
	{StateReceived, StateRunning}:   true,
	{StateReceived, StateCancelled}: true,
	{StateRunning, StateDone}:       true,
	{StateRunning, StateTimedOut}:   true,
	{StateRunning, StateCancelled}:  true,
	{StateRefused, StateAnswered}:   true,
	{StateDone, StateAnswered}:      true,
	{StateTimedOut, StateAnswered}:  true,
}

// ledgerAt returns a ledger holding call "c" in state s, reached through
// allowed transitions only.
func ledgerAt(t *testing.T, s CallState) *ledger {
	t.Helper()
	path := map[CallState][]CallState{
		StateReceived:  nil,
		StateRefused:   {StateRefused},
		StateRunning:   {StateRunning},
		StateDone:      {StateRunning, StateDone},
		StateTimedOut:  {StateRunning, StateTimedOut},
		StateCancelled: {StateCancelled},
		StateAnswered:  {StateRefused, StateAnswered},
	}[s]
	l := &ledger{}
	if !l.receive("c") {
		t.Fatal("receive of a new id refused")
	}
	for _, next := range path {
		if !l.move("c", next) {
			t.Fatalf("setting up %s: move to %s refused", s, next)
		}
	}
	if got := l.state("c"); got != s {
		t.Fatalf("set up state %s, got %s", s, got)
	}
	return l
}

func TestLedgerEveryTransition(t *testing.T) {
	for _, from := range allStates {
		for _, to := range allStates {
			t.Run(fmt.Sprintf("%s→%s", from, to), func(t *testing.T) {
				l := ledgerAt(t, from)
				want := allowed[[2]CallState{from, to}]
				if got := l.move("c", to); got != want {
					t.Fatalf("move %s→%s = %v, want %v", from, to, got, want)
				}
				wantState := from
				if want {
					wantState = to
				}
				if got := l.state("c"); got != wantState {
					t.Errorf("state after move = %s, want %s", got, wantState)
				}
			})
		}
	}
}

func TestLedgerFinalStatesAreFinal(t *testing.T) {
	for _, final := range []CallState{StateCancelled, StateAnswered} {
		for _, to := range allStates {
			l := ledgerAt(t, final)
			if l.move("c", to) || l.cancel("c") {
				t.Errorf("%s moved to %s or was cancelled", final, to)
			}
		}
	}
}

func TestLedgerCancelOnlyReceivedOrRunningCalls(t *testing.T) {
	for _, from := range allStates {
		l := ledgerAt(t, from)
		want := from == StateReceived || from == StateRunning
		if got := l.cancel("c"); got != want {
			t.Errorf("cancel from %s = %v, want %v", from, got, want)
		}
		if want && l.state("c") != StateCancelled {
			t.Errorf("cancel from %s left state %s", from, l.state("c"))
		}
	}
}

func TestLedgerCancelStopsARunningCallOnce(t *testing.T) {
	l := &ledger{}
	l.receive("c")
	var stopped atomic.Int32
	if !l.start("c", func() { stopped.Add(1) }) {
		t.Fatal("start refused")
	}
	if !l.cancel("c") || l.cancel("c") {
		t.Fatal("cancel of a running call: want true once, then false")
	}
	if stopped.Load() != 1 {
		t.Errorf("cancel func ran %d times, want 1", stopped.Load())
	}
	if l.move("c", StateDone) || l.move("c", StateAnswered) {
		t.Error("a cancelled call finished or was answered")
	}
}

func TestLedgerFinishedCallIsNotStoppedByLateCancel(t *testing.T) {
	l := &ledger{}
	l.receive("c")
	var stopped atomic.Int32
	l.start("c", func() { stopped.Add(1) })
	l.move("c", StateDone)
	if l.cancel("c") {
		t.Error("cancel after done reported true")
	}
	if stopped.Load() != 0 {
		t.Error("a late cancel stopped a finished call")
	}
	if !l.move("c", StateAnswered) {
		t.Error("the finished call's answer was withheld by a late cancel")
	}
}

func TestLedgerStartAfterCancelIsRefused(t *testing.T) {
	l := &ledger{}
	l.receive("c")
	l.cancel("c")
	if l.start("c", func() {}) {
		t.Error("a cancelled call started")
	}
}

func TestLedgerDuplicateAndUnknownIDs(t *testing.T) {
	l := &ledger{}
	if l.move("nope", StateAnswered) || l.cancel("nope") || l.start("nope", nil) || l.state("nope") != "" {
		t.Error("an unknown id was moved, cancelled, started or has a state")
	}
	if !l.receive("c") || l.receive("c") {
		t.Fatal("receive: want true for a new id, false for a duplicate")
	}
	l.move("c", StateRefused)
	if l.receive("c") || l.state("c") != StateRefused {
		t.Error("a duplicate reset the call's state")
	}
	if ids := l.ids(); len(ids) != 1 || ids[0] != "c" {
		t.Errorf("ids = %v, want [c]", ids)
	}
}

func TestLedgerAnswerIsExactlyOnceUnderContention(t *testing.T) {
	l := &ledger{}
	l.receive("c")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l.start("c", cancel)
	l.move("c", StateDone)
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if l.move("c", StateAnswered) {
				wins.Add(1)
			}
			l.cancel("c")
		})
	}
	wg.Wait()
	if wins.Load() != 1 || ctx.Err() != nil {
		t.Errorf("%d answers, ctx err %v; want exactly one answer and no cancellation", wins.Load(), ctx.Err())
	}
}
