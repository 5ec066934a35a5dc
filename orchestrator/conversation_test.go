package orchestrator_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/tools"
)

// A Conversation is one session's policy across its turns: the loop
// history, the confirmations asked and answered, fencing and the ledger,
// with the real RedisStore on miniredis (a fake store only where Redis
// must fail).

// conversation opens a conversation on a new session stored in r, with an
// orchestrator built from cfg.
func conversation(t *testing.T, cfg orchestrator.Config, r *redisStores) (*fixture, *orchestrator.Conversation) {
	t.Helper()
	f := newFixture(t)
	o := f.with(cfg, r.deps())
	return f, o.Open(r.session(t, "sess-conv", "user-1", tools.ModeText))
}

// askTransfer makes the transfer call in turn n and returns the
// confirmation the user is shown.
func askTransfer(t *testing.T, cv *orchestrator.Conversation, n int, mode protocol.Mode) orchestrator.Confirmation {
	t.Helper()
	ev := &events{}
	o := handleOne(t, cv.Turn(n, mode), call(fmt.Sprintf("ask-%d", n), "transfer", transferArgs()), ev)
	if confs := ev.confirmations(); errType(o) != tools.ErrConfirmationRequired || len(confs) != 1 {
		t.Fatalf("transfer: %+v, %d confirmations; want CONFIRMATION_REQUIRED and one asked", o.Envelope, len(confs))
	}
	return ev.confirmations()[0]
}

func TestConversationApprovalAnsweredLetsTheRepeatedCallRunInAnyMode(t *testing.T) {
	r := newRedisStores(t)
	f, cv := conversation(t, orchestrator.Config{}, r)
	conf := askTransfer(t, cv, 1, tools.ModeText)

	a, err := cv.Answer(t.Context(), conf.Token, true)
	if err != nil {
		t.Fatalf("Answer: %v", err)
	}
	if a.Outcome != metrics.ConfirmApproved || a.Tool != "transfer" || a.Token != conf.Token {
		t.Fatalf("Answer = %+v, want transfer approved", a)
	}
	if !strings.Contains(a.Note, "approved") || !strings.Contains(a.Note, "transfer") ||
		strings.Contains(a.Note, secretMemo) {
		t.Errorf("note %q: want it to tell the model transfer was approved, without the arguments", a.Note)
	}
	if got := testutil.ToFloat64(f.m.Confirmations.WithLabelValues("approved")); got != 1 {
		t.Errorf("confirmations{approved} = %v, want 1", got)
	}
	// The model calls again, in voice now: the approval is the session's.
	o := handleOne(t, cv.Turn(2, tools.ModeVoice), call("again", "transfer", transferArgs()), &events{})
	if !o.Envelope.OK || f.runs("transfer") != 1 {
		t.Fatalf("approved call: %+v, ran %d times; want it run once", o.Envelope, f.runs("transfer"))
	}
	// Used once: the same token again is unknown, and counted invalid.
	if _, err := cv.Answer(t.Context(), conf.Token, true); !errors.Is(err, orchestrator.ErrConfirmUnknown) {
		t.Fatalf("second answer: %v, want ErrConfirmUnknown", err)
	}
	if got := testutil.ToFloat64(f.m.Confirmations.WithLabelValues("invalid")); got != 1 {
		t.Errorf("confirmations{invalid} = %v, want 1", got)
	}
}

func TestConversationDenialTellsTheModelNotToRepeatAndNothingRuns(t *testing.T) {
	r := newRedisStores(t)
	f, cv := conversation(t, orchestrator.Config{}, r)
	conf := askTransfer(t, cv, 1, tools.ModeText)
	if p, err := cv.Pending(t.Context()); err != nil || len(p) != 1 || p[0].Token != conf.Token {
		t.Fatalf("Pending = %+v, %v; want the one asked", p, err)
	}
	a, err := cv.Answer(t.Context(), conf.Token, false)
	if err != nil || a.Outcome != metrics.ConfirmDenied || !strings.Contains(a.Note, "declined") {
		t.Fatalf("Answer = %+v, %v; want denied with a note saying so", a, err)
	}
	if p, err := cv.Pending(t.Context()); err != nil || len(p) != 0 {
		t.Errorf("Pending after the answer = %+v, %v; want none", p, err)
	}
	askTransfer(t, cv, 2, tools.ModeText) // asked again, never run
	if got := f.runs("transfer"); got != 0 {
		t.Errorf("transfer ran %d times after a denial", got)
	}
}

func TestConversationLateAnswerIsExpiredAndNamesTheCall(t *testing.T) {
	r := newRedisStores(t)
	clk := clock.NewFake(time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC))
	r.store = store.NewRedisStore(r.client, store.RedisStoreOptions{Now: clk.Now})
	f, cv := conversation(t, orchestrator.Config{Budgets: orchestrator.Budgets{ConfirmTTL: time.Minute}, Now: clk.Now}, r)
	conf := askTransfer(t, cv, 1, tools.ModeText)
	clk.Advance(2 * time.Minute)

	a, err := cv.Answer(t.Context(), conf.Token, true)
	if !errors.Is(err, orchestrator.ErrConfirmExpired) || a.Outcome != metrics.ConfirmExpired || a.Tool != "transfer" {
		t.Fatalf("late answer = %+v, %v; want ErrConfirmExpired naming transfer", a, err)
	}
	if a.Note != "" {
		t.Errorf("note %q for a late answer, want none: the model is told nothing", a.Note)
	}
	if got := testutil.ToFloat64(f.m.Confirmations.WithLabelValues("expired")); got != 1 {
		t.Errorf("confirmations{expired} = %v, want 1", got)
	}
	o := handleOne(t, cv.Turn(2, tools.ModeText), call("again", "transfer", transferArgs()), &events{})
	if errType(o) != tools.ErrConfirmationRequired || f.runs("transfer") != 0 {
		t.Errorf("call after a late approval: %+v, want it asked again and not run", o.Envelope)
	}
}

func TestConversationAnswerFromATakenOverConnectionIsFenced(t *testing.T) {
	r := newRedisStores(t)
	f := newFixture(t)
	o := f.with(orchestrator.Config{}, r.deps())
	stale, told, epoch := takenOverSession(t, r, "sess-taken")
	owner := o.Open(orchestrator.Session{ID: stale.ID, UserID: stale.UserID, Epoch: epoch})
	conf := askTransfer(t, owner, 1, tools.ModeText)
	cv := o.Open(stale)

	if _, err := cv.Answer(t.Context(), conf.Token, true); !errors.Is(err, orchestrator.ErrFenced) {
		t.Fatalf("answer from the old owner: %v, want ErrFenced", err)
	}
	if told.Load() != 1 {
		t.Errorf("TakenOver called %d times, want once", told.Load())
	}
	if p, err := cv.Pending(t.Context()); err != nil || len(p) != 1 {
		t.Errorf("Pending = %+v, %v; want the confirmation still waiting for its owner", p, err)
	}
}

// downConfirms is a confirmation store that cannot be reached.
type downConfirms struct{ asked atomic.Int64 }

var errRedisDown = errors.New("dial tcp: connection refused")

func (d *downConfirms) ConsumeOrRequest(context.Context, orchestrator.Confirmation) (bool, string, error) {
	return false, "", errRedisDown
}

func (d *downConfirms) Resolve(context.Context, string, int64, string, string, bool, time.Duration) (orchestrator.Confirmation, error) {
	d.asked.Add(1)
	return orchestrator.Confirmation{}, errRedisDown
}

func (d *downConfirms) Pending(context.Context, string) ([]orchestrator.Confirmation, error) {
	return nil, errRedisDown
}

func (d *downConfirms) Revoke(context.Context, string, int64, string, string, string) error {
	return errRedisDown
}

func TestConversationAnswerWithTheStoreDownIsAnErrorTheSessionCanRetry(t *testing.T) {
	f := newFixture(t)
	down := &downConfirms{}
	cv := f.with(orchestrator.Config{}, orchestrator.Deps{Confirms: down}).Open(orchestrator.Session{ID: "s", UserID: "u"})
	_, err := cv.Answer(t.Context(), "c_tok", true)
	if !errors.Is(err, errRedisDown) || errors.Is(err, orchestrator.ErrConfirmUnknown) || down.asked.Load() != 1 {
		t.Fatalf("Answer = %v (store asked %d times), want the store's error", err, down.asked.Load())
	}
	for _, o := range metrics.ConfirmationOutcomes {
		if got := testutil.ToFloat64(f.m.Confirmations.WithLabelValues(string(o))); got != 0 {
			t.Errorf("confirmations{%s} = %v, want nothing counted for an answer not taken", o, got)
		}
	}
	if _, err := cv.Pending(t.Context()); !errors.Is(err, errRedisDown) {
		t.Errorf("Pending = %v, want the store's error", err)
	}
}

func TestConversationLoopHistorySpansTextAndVoiceTurnsAndKeepsTheLastOnes(t *testing.T) {
	f := newFixture(t)
	cv := f.with(orchestrator.Config{LoopTurns: 2}, orchestrator.Deps{}).Open(orchestrator.Session{ID: "s", UserID: "u"})
	args := map[string]any{"query": loopQuery}
	for n, mode := range []protocol.Mode{tools.ModeText, tools.ModeVoice, tools.ModeText} {
		tr := cv.Turn(n+1, mode)
		handleOne(t, tr, call("a", "search", args), &events{})
		handleOne(t, tr, call("b", "search", args), &events{})
		if n == 1 {
			// The third identical call of a voice turn is a loop, as in text.
			wantLoop(t, handleOne(t, tr, call("c", "search", args), &events{}), loopQuery)
		}
	}
	state := cv.LoopState()
	if cv.LoopTurns() != 2 || len(state) != 2 || state[0].Turn != 2 || state[1].Turn != 3 {
		t.Fatalf("loop history %+v (%d turns), want the last 2 turns, 2 and 3", state, cv.LoopTurns())
	}
	detections := 0
	for _, n := range state[0].Tools[0].Detections {
		detections += n
	}
	if detections != 1 {
		t.Errorf("turn 2 detections %+v, want one", state[0].Tools[0].Detections)
	}
}
