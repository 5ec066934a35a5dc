package orchestrator

import (
	"context"
	"crypto/sha256"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/turnstile-gw/turnstile/tools"
)

// Idempotency keys (docs/tools.md, "Idempotency"). An action is one tool
// with one set of canonical arguments, asked for in one turn of one
// session. Its key is the same for every call of it in that turn — the
// model's retries after a timeout or a 5xx — and travels with a
// confirmation it asks for, so that the approved run, which comes in a
// later turn under a new call ID, is the same action again. Any other call
// has another key. Tools get it as Idempotency-Key (HTTP) or
// turnstile/idempotencyKey (MCP _meta), and the ledger runs an action tool
// at most once per key after a success: a later call of the same action is
// answered with the stored result (Outcome.Repeated).

// keySpace is the namespace of the keys' name-based UUIDs.
var keySpace = uuid.MustParse("6f1d3a2e-9c4b-4e57-8a0d-5b7e2c9f1a34")

// IdempotencyKey is the key of the action: tool with arguments of the given
// canonical digest (tools.ArgsDigest), in turn n of a session. It is a
// name-based UUID (version 8, SHA-256), which APIs that want UUID keys
// take; the same inputs give the same key on every node.
func IdempotencyKey(sessionID string, n int, tool, digest string) string {
	name := sessionID + "\x00" + strconv.Itoa(n) + "\x00" + tool + "\x00" + digest
	return uuid.NewHash(sha256.New(), keySpace, []byte(name), 8).String()
}

// action is one action of a turn: its key and what is known of its
// success. Calls of the same action run one at a time (mu), so that a
// repeat made in the same model message waits for the first and is
// answered from it rather than run twice.
type action struct {
	key string
	// approved: the key came with the user's approval, from the turn that
	// asked for it (maybe on another node); the durable ledger may know a
	// success of it, and is asked once.
	approved bool

	mu      sync.Mutex
	checked bool                       // the durable ledger was asked (approved keys only); under mu
	done    atomic.Pointer[CallRecord] // a success: later calls are answered with it
}

// doneHere reports whether the action succeeded in this turn (or the
// ledger said so): a later call of it is answered from the ledger, and
// nobody is asked to approve it.
func (a *action) doneHere() bool { return a.done.Load() != nil }

// actionOf returns the turn's action for tool and digest, creating it with
// the turn's own key.
func (t *Turn) actionOf(tool, digest string) *action {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := tool + "\x00" + digest
	if a, ok := t.actions[id]; ok {
		return a
	}
	if t.actions == nil {
		t.actions = map[string]*action{}
	}
	a := &action{key: IdempotencyKey(t.s.ID, t.n, tool, digest)}
	t.actions[id] = a
	return a
}

// adopt makes key, which came with the user's approval, the key of the
// action for tool and digest in this turn: the approved run and its
// retries are the action the user approved. A call already running keeps
// the action it had.
func (t *Turn) adopt(tool, digest, key string) *action {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := tool + "\x00" + digest
	if a, ok := t.actions[id]; ok && a.key == key {
		return a
	}
	if t.actions == nil {
		t.actions = map[string]*action{}
	}
	a := &action{key: key, approved: true}
	t.actions[id] = a
	return a
}

// succeeded reports the success of act already recorded, if any: in this
// turn, or — for a key that came with an approval — in the durable ledger
// (one round trip, once per action and turn). Without a ledger, or when it
// cannot be reached, nothing is known and the call runs: the tool's own
// idempotency (the key it gets) is then the only guard, and the log says
// so. act.mu is held.
func (t *Turn) succeeded(ctx context.Context, act *action) (CallRecord, bool) {
	if rec := act.done.Load(); rec != nil {
		return *rec, true
	}
	if !act.approved || act.checked || t.o.Ledger == nil || t.fenced.Load() {
		return CallRecord{}, false
	}
	act.checked = true
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.o.cfg.StoreTimeout)
	defer cancel()
	rec, ok, err := t.o.Ledger.Succeeded(sctx, t.s.ID, act.key)
	if err != nil {
		t.o.Log.WarnContext(ctx, "call ledger unavailable: an approved action runs without checking for an earlier success",
			"session", t.s.ID, "turn", t.n, "err", err)
		return CallRecord{}, false
	}
	if ok && rec.Response != nil {
		act.done.Store(&rec)
		return rec, true
	}
	return CallRecord{}, false
}

// repeat answers a call of an action that already succeeded with that
// success's response, without running the tool: the browser sees a
// successful tool.result, the model the same answer as the first time.
func (t *Turn) repeat(ctx context.Context, c Call, a admission, rec CallRecord, ev Events) Outcome {
	if !t.ledger.move(c.ID, StateReplayed) {
		return t.cancelled(ctx, c, a, 0, ev)
	}
	t.o.Metrics.IdempotentRepeat(a.label)
	t.o.Log.InfoContext(ctx, "action already done: answered from the ledger, not run again", "session", t.s.ID,
		"turn", t.n, "tool", a.label, "call", c.ID, "first_call", rec.ID, "first_turn", rec.Turn)
	t.releaseTerminal(a)
	t.markUntrusted(a.tool)
	out := Outcome{Response: rec.Response, Repeated: true, Envelope: tools.Envelope{OK: true, Data: rec.Response["output"]}}
	out.Shown = shownFields(a.tool, out.Envelope.Data)
	t.ledger.setRecord(c.ID, CallRecord{ID: c.ID, Tool: a.label, Turn: t.n, Outcome: "ok", ArgsDigest: a.digest,
		Response: rec.Response})
	if ev != nil {
		ev.CallFinished(c, out)
	}
	return out
}
