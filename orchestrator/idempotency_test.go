package orchestrator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/transport"
)

// Idempotency keys and the ledger's at-most-once run of an action
// (idempotency.go), with the real RedisStore on miniredis.

// keyRecorder is the service behind the test's action tools: it records
// every call's identity and answers from a script of outcomes (success
// when the script is empty).
type keyRecorder struct {
	mu    sync.Mutex
	calls []tools.Call
	fails int // the next fails calls answer TRANSIENT with partial side effects
}

func (k *keyRecorder) handle(_ context.Context, c tools.Call) tools.Envelope {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls = append(k.calls, c)
	if k.fails > 0 {
		k.fails--
		return tools.Fail(tools.ErrTransient, "the service answered HTTP 503", true, true)
	}
	var args map[string]any
	_ = json.Unmarshal(c.Args, &args)
	return tools.OK(map[string]any{"id": "T-1", "item": args["item"]})
}

func (k *keyRecorder) keys() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, c := range k.calls {
		out = append(out, c.IdempotencyKey)
	}
	return out
}

type idemFixture struct {
	rec  *keyRecorder
	r    *redisStores
	m    *metrics.Metrics
	reg  *prometheus.Registry
	node [2]*orchestrator.Orchestrator // two gateway nodes sharing the Redis
	sess orchestrator.Session
}

func newIdemFixture(t *testing.T) *idemFixture {
	f := &idemFixture{rec: &keyRecorder{}, r: newRedisStores(t), reg: prometheus.NewRegistry()}
	both := `"text","voice"`
	specs := map[string]toolSpec{
		"order": {category: "action", modes: both, params: `"item": {"type": "string"}, "qty": {"type": "integer"}`,
			required: `"item"`, redact: `"item"`, handler: f.rec.handle},
		"pay": {category: "action", modes: both, extra: `"requiresConfirmation": true,`,
			params: `"amount": {"type": "integer"}`, required: `"amount"`, redact: `"amount"`, handler: f.rec.handle},
	}
	fsys := fstest.MapFS{}
	handlers := map[string]tools.Handler{}
	for name, s := range specs {
		fsys[name+"/schema.json"] = &fstest.MapFile{Data: []byte(s.schema(name))}
		fsys[name+"/guide.md"] = &fstest.MapFile{Data: []byte("# " + name + "\n\nA test tool.\n")}
		handlers[name] = s.handler
	}
	reg, err := tools.Load(fsys, handlers)
	if err != nil {
		t.Fatal(err)
	}
	f.m = metrics.New(f.reg, metrics.Build{})
	for i := range f.node {
		f.node[i] = orchestrator.NewWith(orchestrator.Config{}, orchestrator.Deps{Registry: reg, Metrics: f.m,
			Log: slog.New(slog.DiscardHandler), Ledger: f.r.store, Confirms: f.r.store})
	}
	f.sess = f.r.session(t, "sess-1", "user-1", tools.ModeText)
	f.sess.Claims = tools.Claims{"tenant": "acme"}
	return f
}

// round runs one model message of turn tr and records the answers as sent.
func roundOf(tr *orchestrator.Turn, ev orchestrator.Events, calls ...orchestrator.Call) []orchestrator.Outcome {
	fcs := make([]transport.FunctionCall, len(calls))
	for i, c := range calls {
		fcs[i] = transport.FunctionCall{ID: c.ID, Name: c.Name, Args: c.Args}
	}
	r := tr.Round(context.Background(), fcs, ev)
	out := make([]orchestrator.Outcome, len(r.Results))
	for i, res := range r.Results {
		out[i] = res.Outcome
	}
	return out
}

func TestRetriedActionGetsTheSameIdempotencyKeyAndOtherActionsAnother(t *testing.T) {
	f := newIdemFixture(t)
	f.rec.fails = 1
	tr := f.node[0].NewTurn(f.sess, 1, nil)
	first := roundOf(tr, nil, call("c1", "order", map[string]any{"item": "grinder", "qty": 1}))[0]
	if errType(first) != tools.ErrTransient {
		t.Fatalf("first call: %+v", first.Envelope)
	}
	// The model retries with the same arguments (keys in another order),
	// then orders something else; next turn it orders the grinder again.
	roundOf(tr, nil, call("c2", "order", map[string]any{"qty": 1, "item": "grinder"}))
	roundOf(tr, nil, call("c3", "order", map[string]any{"item": "kettle", "qty": 1}))
	roundOf(f.node[0].NewTurn(f.sess, 2, nil), nil, call("c4", "order", map[string]any{"item": "grinder", "qty": 1}))

	keys := f.rec.keys()
	if len(keys) != 4 {
		t.Fatalf("the service got %d calls, want 4", len(keys))
	}
	if keys[0] == "" || keys[0] != keys[1] {
		t.Errorf("retry key %q, want the first call's %q", keys[1], keys[0])
	}
	if keys[2] == keys[0] || keys[3] == keys[0] || keys[2] == keys[3] {
		t.Errorf("keys %v: another action, or the same one in another turn, must get another key", keys)
	}
	c := f.rec.calls[0]
	if c.UserID != "user-1" || c.SessionID != "sess-1" || c.ID != "c1" || c.Claims["tenant"] != "acme" {
		t.Errorf("the tool got user %q session %q call %q claims %v", c.UserID, c.SessionID, c.ID, c.Claims)
	}
}

func TestActionThatSucceededIsAnsweredFromTheLedgerNotRunAgain(t *testing.T) {
	f := newIdemFixture(t)
	tr := f.node[0].NewTurn(f.sess, 1, nil)
	args := map[string]any{"item": "grinder"}
	first := roundOf(tr, nil, call("c1", "order", args))[0]
	ev := &events{}
	// Again in a later message, and twice at once in one message.
	again := roundOf(tr, ev, call("c2", "order", args))[0]
	both := roundOf(f.node[0].NewTurn(f.sess, 2, nil), nil, call("d1", "order", args), call("d2", "order", args))

	if n := len(f.rec.keys()); n != 2 {
		t.Fatalf("the service got %d calls, want 2 (one per turn)", n)
	}
	if !again.Envelope.OK || !again.Repeated || again.Refused {
		t.Fatalf("repeat: %+v repeated=%v", again.Envelope, again.Repeated)
	}
	if got, want := fmt.Sprint(jsonOf(t, again.Response)), fmt.Sprint(jsonOf(t, first.Response)); got != want {
		t.Errorf("repeat answered %s, want the first answer %s", got, want)
	}
	if len(ev.finished) != 1 || !ev.finished[0].Envelope.OK {
		t.Errorf("the browser was not told the repeat's outcome: %+v", ev.finished)
	}
	if both[0].Repeated == both[1].Repeated || !both[0].Envelope.OK || !both[1].Envelope.OK {
		t.Errorf("two identical calls in one message: one runs and one is answered from it; got %+v", both)
	}
	if n := testutil.ToFloat64(f.m.IdempotentRepeats.WithLabelValues("order")); n != 2 {
		t.Errorf("turnstile_tool_idempotent_repeats_total{order} = %v, want 2", n)
	}
}

func TestApprovedRunHasTheKeyOfTheCallThatAskedAndRunsOnceAcrossNodes(t *testing.T) {
	f := newIdemFixture(t)
	args := map[string]any{"amount": 25}
	// Turn 1 (node 0): the model asks twice; two confirmations are shown,
	// both for the same action.
	tr := f.node[0].NewTurn(f.sess, 1, nil)
	ev := &events{}
	roundOf(tr, ev, call("c1", "pay", args))
	roundOf(tr, ev, call("c2", "pay", args))
	confs := ev.confirmations()
	if len(confs) != 2 || confs[0].IdempotencyKey == "" || confs[0].IdempotencyKey != confs[1].IdempotencyKey {
		t.Fatalf("confirmations %+v, want two with one key", confs)
	}
	key := confs[0].IdempotencyKey
	resolve := func(token string) {
		t.Helper()
		if _, err := f.r.store.Resolve(context.Background(), f.sess.ID, f.sess.Epoch, f.sess.UserID, token, true, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	// The user approves the first; the approved run (turn 2, node 1) fails
	// with a 5xx, and its retry needs an approval again: same action.
	f.rec.fails = 1
	resolve(confs[0].Token)
	tr2 := f.node[1].NewTurn(f.sess, 2, nil)
	ev2 := &events{}
	if o := roundOf(tr2, ev2, call("c3", "pay", args))[0]; errType(o) != tools.ErrTransient {
		t.Fatalf("approved run: %+v", o.Envelope)
	}
	roundOf(tr2, ev2, call("c4", "pay", args))
	if cs := ev2.confirmations(); len(cs) != 1 || cs[0].IdempotencyKey != key {
		t.Fatalf("the retry's confirmation %+v, want the approved action's key %s", cs, key)
	}
	resolve(ev2.confirmations()[0].Token)
	// Turn 3 (node 0): the approved retry runs and succeeds.
	if o := roundOf(f.node[0].NewTurn(f.sess, 3, nil), nil, call("c5", "pay", args))[0]; !o.Envelope.OK || o.Repeated {
		t.Fatalf("approved retry: %+v", o.Envelope)
	}
	// The user approves the second confirmation of turn 1 too; the model
	// calls again on node 1: the action had succeeded, so nothing runs.
	resolve(confs[1].Token)
	o := roundOf(f.node[1].NewTurn(f.sess, 4, nil), nil, call("c6", "pay", args))[0]
	if !o.Envelope.OK || !o.Repeated {
		t.Fatalf("a second approval of the same action: %+v repeated=%v, want answered from the ledger", o.Envelope, o.Repeated)
	}
	if keys := f.rec.keys(); len(keys) != 2 || keys[0] != key || keys[1] != key {
		t.Fatalf("the service got keys %v, want the approved action's %s twice (the failed run and its retry)", keys, key)
	}
}
