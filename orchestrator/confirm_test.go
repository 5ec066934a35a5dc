package orchestrator_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/tools"
)

// Confirmation (DESIGN §6 step 5) with the real RedisStore on miniredis.

const secretMemo = "rent for flat 7b, card 4111"

// confirmFixture is a fixture whose orchestrator keeps its ledger and
// confirmations in Redis; turns are numbered as they are started.
type confirmFixture struct {
	*fixture
	r    *redisStores
	o    *orchestrator.Orchestrator
	sess orchestrator.Session
	n    int
}

func newConfirmFixture(t *testing.T, cfg orchestrator.Config) *confirmFixture {
	return newConfirmFixtureOn(t, cfg, nil)
}

// newConfirmFixtureOn is newConfirmFixture with the orchestrator and the
// store on clk, which the test moves (confirmations expire by it); nil is
// the wall clock.
func newConfirmFixtureOn(t *testing.T, cfg orchestrator.Config, clk *clock.Fake) *confirmFixture {
	f := newFixture(t)
	r := newRedisStores(t)
	if clk != nil {
		r.store = store.NewRedisStore(r.client, store.RedisStoreOptions{Now: clk.Now})
		cfg.Now = clk.Now
	}
	return &confirmFixture{fixture: f, r: r, o: f.with(cfg, r.deps()),
		sess: r.session(t, "sess-1", "user-1", tools.ModeText)}
}

// turn starts the session's next turn.
func (c *confirmFixture) turn() *orchestrator.Turn {
	c.n++
	return c.o.NewTurn(c.sess, c.n, nil)
}

// transferArgs are the arguments of the call the tests confirm.
func transferArgs() map[string]any {
	return map[string]any{"amount": 25, "to": "alice", "memo": secretMemo}
}

// request makes the transfer call in a turn of its own, checks that it is
// refused for confirmation, and returns the confirmation shown to the user.
func (c *confirmFixture) request(t *testing.T, args map[string]any) orchestrator.Confirmation {
	t.Helper()
	ev := &events{}
	o := handleOne(t, c.turn(), call(fmt.Sprintf("req-%d", c.n), "transfer", args), ev)
	confs := ev.confirmations()
	if errType(o) != tools.ErrConfirmationRequired || !o.Refused || len(confs) != 1 {
		t.Fatalf("outcome %+v, %d confirmations, want CONFIRMATION_REQUIRED and one ConfirmRequested", o.Envelope, len(confs))
	}
	if !strings.Contains(o.Envelope.Error.Message, confs[0].Token) {
		t.Errorf("message %q, want it to carry the token %s", o.Envelope.Error.Message, confs[0].Token)
	}
	return confs[0]
}

// callTransfer makes the call again in a new turn and returns its outcome.
func (c *confirmFixture) callTransfer(t *testing.T, args map[string]any) orchestrator.Outcome {
	t.Helper()
	tr := c.turn()
	return handleOne(t, tr, call(fmt.Sprintf("again-%d", c.n), "transfer", args), &events{})
}

func (c *confirmFixture) resolve(token string, approve bool) (orchestrator.Confirmation, error) {
	return c.r.store.Resolve(context.Background(), c.sess.ID, c.sess.Epoch, c.sess.UserID, token, approve, time.Minute)
}

func (c *confirmFixture) pending(t *testing.T) []orchestrator.Confirmation {
	t.Helper()
	p, err := c.r.store.Pending(context.Background(), c.sess.ID)
	if err != nil {
		t.Fatalf("Pending: %v", err)
	}
	return p
}

func TestConfirmationIsRequestedWithRedactedArgsAndHandlerNotRun(t *testing.T) {
	c := newConfirmFixture(t, orchestrator.Config{})
	before := time.Now()
	conf := c.request(t, transferArgs())

	if conf.Token == "" || conf.SessionID != "sess-1" || conf.UserID != "user-1" || conf.Tool != "transfer" ||
		conf.ArgsDigest == "" || conf.Turn != 1 {
		t.Errorf("confirmation %+v, want token, session, user, tool, digest and turn", conf)
	}
	wantArgs := map[string]any{"amount": tools.Redacted, "to": "alice", "memo": tools.Redacted}
	for k, v := range wantArgs {
		if conf.Args[k] != v {
			t.Errorf("shown args[%s] = %v, want %v (only allow-listed values are shown)", k, conf.Args[k], v)
		}
	}
	if ttl := conf.ExpiresAt.Sub(before); ttl < time.Minute || ttl > 2*time.Minute+time.Second {
		t.Errorf("expires in %v, want about the default 2 min", ttl)
	}
	if got := c.runs("transfer"); got != 0 {
		t.Errorf("transfer ran %d times before approval", got)
	}
	if strings.Contains(c.r.mr.Dump(), "4111") {
		t.Error("Redis holds the unredacted memo")
	}
	p := c.pending(t)
	if len(p) != 1 || p[0].Token != conf.Token || p[0].Args["to"] != "alice" {
		t.Errorf("Pending = %+v, want the one confirmation", p)
	}
	if got := testutil.ToFloat64(c.m.Confirmations.WithLabelValues("requested")); got != 1 {
		t.Errorf("confirmations{requested} = %v, want 1", got)
	}
}

func TestApprovedCallRunsExactlyOnceAndApprovalIsSingleUse(t *testing.T) {
	c := newConfirmFixture(t, orchestrator.Config{})
	conf := c.request(t, transferArgs())
	got, err := c.resolve(conf.Token, true)
	if err != nil || got.Token != conf.Token || got.Tool != "transfer" {
		t.Fatalf("Resolve = %+v, %v; want the confirmation", got, err)
	}
	if p := c.pending(t); len(p) != 0 {
		t.Errorf("Pending after the answer = %+v, want none", p)
	}

	// The model repeats the call, spelling the arguments differently.
	o := c.callTransfer(t, jsonArgs(t, `{"memo": "`+secretMemo+`", "to": "alice", "amount": 25.0}`))
	if !o.Envelope.OK || o.Refused {
		t.Fatalf("approved call: %+v, want it run", o.Envelope)
	}
	if got := c.runs("transfer"); got != 1 {
		t.Fatalf("transfer ran %d times, want 1", got)
	}
	if got := testutil.ToFloat64(c.m.Confirmations.WithLabelValues("consumed")); got != 1 {
		t.Errorf("confirmations{consumed} = %v, want 1", got)
	}

	// Single use: the same call again needs a new approval.
	again := c.request(t, transferArgs())
	if again.Token == conf.Token {
		t.Error("a new request reused the old token")
	}
	if got := c.runs("transfer"); got != 1 {
		t.Errorf("transfer ran %d times, want still 1", got)
	}
}

func TestApprovalDoesNotCoverOtherArguments(t *testing.T) {
	c := newConfirmFixture(t, orchestrator.Config{})
	conf := c.request(t, transferArgs())
	if _, err := c.resolve(conf.Token, true); err != nil {
		t.Fatal(err)
	}
	other := transferArgs()
	other["amount"] = 2500
	if o := c.callTransfer(t, other); errType(o) != tools.ErrConfirmationRequired {
		t.Fatalf("call with another amount: %+v, want CONFIRMATION_REQUIRED", o.Envelope)
	}
	if got := c.runs("transfer"); got != 0 {
		t.Fatalf("transfer ran %d times with unapproved arguments", got)
	}
	// The approval for the exact call still stands.
	if o := c.callTransfer(t, transferArgs()); !o.Envelope.OK {
		t.Errorf("approved call after the other one: %+v, want it run", o.Envelope)
	}
}

func TestDeniedCallNeverRuns(t *testing.T) {
	c := newConfirmFixture(t, orchestrator.Config{})
	conf := c.request(t, transferArgs())
	if _, err := c.resolve(conf.Token, false); err != nil {
		t.Fatalf("deny: %v", err)
	}
	if p := c.pending(t); len(p) != 0 {
		t.Errorf("Pending after a denial = %+v, want none", p)
	}
	c.request(t, transferArgs())
	if got := c.runs("transfer"); got != 0 {
		t.Errorf("transfer ran %d times after a denial", got)
	}
}

func TestLateAnswerIsExpiredAndNeverRuns(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC))
	c := newConfirmFixtureOn(t, orchestrator.Config{Budgets: orchestrator.Budgets{ConfirmTTL: time.Second}}, clk)
	conf := c.request(t, transferArgs())
	clk.Set(conf.ExpiresAt.Add(20 * time.Millisecond))

	if p := c.pending(t); len(p) != 0 {
		t.Errorf("Pending after expiry = %+v, want none", p)
	}
	if _, err := c.resolve(conf.Token, true); !errors.Is(err, orchestrator.ErrConfirmExpired) {
		t.Fatalf("late approval: err %v, want ErrConfirmExpired", err)
	}
	if o := c.callTransfer(t, transferArgs()); errType(o) != tools.ErrConfirmationRequired {
		t.Errorf("call after a late approval: %+v, want CONFIRMATION_REQUIRED", o.Envelope)
	}
	if got := c.runs("transfer"); got != 0 {
		t.Errorf("transfer ran %d times after a late approval", got)
	}
}

func TestConfirmationForgottenLongAfterExpiryIsUnknown(t *testing.T) {
	c := newConfirmFixture(t, orchestrator.Config{Budgets: orchestrator.Budgets{ConfirmTTL: time.Minute}})
	conf := c.request(t, transferArgs())
	c.r.mr.FastForward(time.Hour)
	if _, err := c.resolve(conf.Token, true); !errors.Is(err, orchestrator.ErrConfirmUnknown) {
		t.Errorf("answer an hour later: err %v, want ErrConfirmUnknown", err)
	}
}

func TestApprovalThatWaitsTooLongExpires(t *testing.T) {
	c := newConfirmFixture(t, orchestrator.Config{})
	conf := c.request(t, transferArgs())
	if _, err := c.resolve(conf.Token, true); err != nil { // approval valid for 1 min
		t.Fatal(err)
	}
	c.r.mr.FastForward(2 * time.Minute)
	if o := c.callTransfer(t, transferArgs()); errType(o) != tools.ErrConfirmationRequired {
		t.Errorf("call after the approval expired: %+v, want CONFIRMATION_REQUIRED", o.Envelope)
	}
	if got := c.runs("transfer"); got != 0 {
		t.Errorf("transfer ran %d times on an expired approval", got)
	}
}

func TestTokenCannotBeUsedTwice(t *testing.T) {
	c := newConfirmFixture(t, orchestrator.Config{})
	conf := c.request(t, transferArgs())
	if _, err := c.resolve(conf.Token, true); err != nil {
		t.Fatal(err)
	}
	for _, approve := range []bool{true, false} {
		if _, err := c.resolve(conf.Token, approve); !errors.Is(err, orchestrator.ErrConfirmUnknown) {
			t.Errorf("reuse (approve=%v): err %v, want ErrConfirmUnknown", approve, err)
		}
	}
	// The reuse neither withdrew nor doubled the approval.
	if o := c.callTransfer(t, transferArgs()); !o.Envelope.OK {
		t.Fatalf("approved call: %+v", o.Envelope)
	}
	if o := c.callTransfer(t, transferArgs()); errType(o) != tools.ErrConfirmationRequired {
		t.Errorf("second call: %+v, want CONFIRMATION_REQUIRED", o.Envelope)
	}
	if got := c.runs("transfer"); got != 1 {
		t.Errorf("transfer ran %d times, want 1", got)
	}
}

func TestUnknownTokenIsUnknown(t *testing.T) {
	c := newConfirmFixture(t, orchestrator.Config{})
	if _, err := c.resolve("c_made_up", true); !errors.Is(err, orchestrator.ErrConfirmUnknown) {
		t.Errorf("made-up token: err %v, want ErrConfirmUnknown", err)
	}
}

func TestOtherUserOrSessionCannotResolve(t *testing.T) {
	for _, who := range []struct{ name, session, user string }{
		{"other user", "sess-1", "user-2"},
		{"other session", "sess-2", "user-1"},
	} {
		t.Run(who.name, func(t *testing.T) {
			c := newConfirmFixture(t, orchestrator.Config{})
			conf := c.request(t, transferArgs())
			epoch := c.sess.Epoch
			if who.session != c.sess.ID {
				epoch = c.r.session(t, who.session, who.user, tools.ModeText).Epoch // the user's other session
			}
			_, err := c.r.store.Resolve(t.Context(), who.session, epoch, who.user, conf.Token, true, time.Minute)
			if !errors.Is(err, orchestrator.ErrConfirmUnknown) {
				t.Fatalf("Resolve by %s: err %v, want ErrConfirmUnknown", who.name, err)
			}
			if o := c.callTransfer(t, transferArgs()); errType(o) != tools.ErrConfirmationRequired {
				t.Fatalf("call after a foreign approval: %+v, want CONFIRMATION_REQUIRED", o.Envelope)
			}
			if got := c.runs("transfer"); got != 0 {
				t.Fatalf("transfer ran %d times on a foreign approval", got)
			}
			// The foreign attempt must not take the user's own answer away.
			if _, err := c.resolve(conf.Token, true); err != nil {
				t.Errorf("the rightful user's approval after a foreign attempt: %v, want it accepted", err)
			}
		})
	}
}

func TestPendingListsConfirmationsUntilAnswered(t *testing.T) {
	c := newConfirmFixture(t, orchestrator.Config{})
	a := c.request(t, transferArgs())
	other := transferArgs()
	other["to"] = "bob"
	b := c.request(t, other)
	if p := c.pending(t); len(p) != 2 {
		t.Fatalf("Pending = %+v, want both", p)
	}
	if _, err := c.resolve(a.Token, true); err != nil {
		t.Fatal(err)
	}
	if p := c.pending(t); len(p) != 1 || p[0].Token != b.Token {
		t.Fatalf("Pending = %+v, want only %s", p, b.Token)
	}
	if _, err := c.resolve(b.Token, false); err != nil {
		t.Fatal(err)
	}
	if p := c.pending(t); len(p) != 0 {
		t.Errorf("Pending = %+v, want none", p)
	}
}

func TestConfirmationWithoutStoreIsRefused(t *testing.T) {
	f := newFixture(t)
	ev := &events{}
	tr := f.orch.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: tools.ModeText}, 1, nil)
	o := handleOne(t, tr, call("c", "transfer", transferArgs()), ev)
	if errType(o) != tools.ErrConfirmationRequired || len(ev.confirmations()) != 0 || f.runs("transfer") != 0 {
		t.Errorf("outcome %+v, %d confirmations, %d runs; want CONFIRMATION_REQUIRED, none asked, not run",
			o.Envelope, len(ev.confirmations()), f.runs("transfer"))
	}
}

// Refused before it ran, so not retryable as it stands (the spec: a
// pre-execution refusal is never retryable) and without side effects.
func TestConfirmationStoreDownIsTransientAndNotRun(t *testing.T) {
	c := newConfirmFixture(t, orchestrator.Config{StoreTimeout: 200 * time.Millisecond})
	c.r.mr.SetError("LOADING Redis is loading the dataset in memory")
	o := handleOne(t, c.turn(), call("c", "transfer", transferArgs()), &events{})
	if errType(o) != tools.ErrTransient || o.Envelope.Error.Retryable || o.Envelope.Error.PartialSideEffects {
		t.Errorf("outcome %+v, want a non-retryable TRANSIENT error without side effects", o.Envelope.Error)
	}
	if got := c.runs("transfer"); got != 0 {
		t.Errorf("transfer ran %d times without an approval check", got)
	}
}

func TestConfirmationExpiryIsAtLeastTheConfiguredTTL(t *testing.T) {
	// Ask 0.7 s into a second, so that an expiry rounded to whole seconds
	// would lose 0.2 s of it.
	clk := clock.NewFake(time.Date(2026, 11, 27, 4, 0, 0, 700*int(time.Millisecond), time.UTC))
	c := newConfirmFixtureOn(t, orchestrator.Config{Budgets: orchestrator.Budgets{ConfirmTTL: 1500 * time.Millisecond}}, clk)
	before := clk.Now()
	conf := c.request(t, transferArgs())
	if !conf.ExpiresAt.After(before.Add(1400 * time.Millisecond)) {
		t.Errorf("confirmation expires %v after it was asked for, want the configured 1.5 s",
			conf.ExpiresAt.Sub(before))
	}
}
