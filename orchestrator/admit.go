package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tracing"
)

// InvalidJSON is the error code of a call whose arguments did not parse.
const InvalidJSON = "invalid_json"

// refuse answers a call without running it. Such refusals are never
// retryable as they stand and have no side effects: the model must change
// something (arguments, approach, the user's approval) before calling again.
func refuse(a admission, t tools.ErrorType, msg string) admission {
	env := tools.Fail(t, msg, false, false)
	a.refusal = &env
	return a
}

// admit runs steps 1–7 for one call. after names the tool whose untrusted
// output reached the model earlier in the turn ("" when none did).
func (t *Turn) admit(ctx context.Context, c Call, after string, ev Events) admission {
	a := admission{label: unknownTool}
	// 1. lookup
	tool, ok := t.reg.Lookup(c.Name)
	if !ok {
		return refuse(a, tools.ErrNotFound, "there is no tool with that name; use one of the declared tools")
	}
	a.tool, a.label = tool, tool.Name
	a.terminal = tool.Terminal
	// 2. mode restriction
	if !tool.AllowedIn(t.s.Mode) {
		return refuse(a, tools.ErrModeRestricted, fmt.Sprintf("%s is not available in %s mode", tool.Name, t.s.Mode))
	}
	// Arguments the model sent but nobody could read are fed back as such.
	if c.ArgsError != "" {
		a = refuse(a, tools.ErrValidation, "Invalid tool arguments JSON")
		a.refusal.Error.Code = InvalidJSON
		return a
	}
	// 3. loop detection on canonical arguments, before the gates: a loop
	// is refused as a loop (the feedback says what to do instead) and does
	// not use up the turn's budget.
	raw, err := json.Marshal(nonNil(c.Args))
	if err == nil {
		a.raw = raw
		if canon, cerr := tools.CanonicalArgs(raw); cerr == nil {
			a.digest = tools.ArgsDigest(canon)
		}
	}
	// (Arguments that cannot be canonicalised have no digest; validation
	// refuses them below, and they must not all count as one repeated call.)
	if a.digest != "" {
		if rule, loop := t.loops.CheckAndRecord(t.n, tool.Name, a.digest); loop {
			t.o.Metrics.LoopDetection(rule)
			traceAttr(ctx, tracing.AttrToolLoopRule.String(string(rule)))
			return refuse(a, tools.ErrLoopDetected, t.loops.Feedback(rule, tool.Name))
		}
	}
	// 4. per-turn gates, counted in arrival order. Tools that end the turn
	// (terminal) or a session (endsSession) are exempt: a model out of
	// budget must still be able to finish or say goodbye.
	if gate, ok := t.takeBudget(tool, tool.Terminal || tool.EndsSession); !ok {
		t.o.Metrics.GateRefusal(gate, t.s.Mode)
		return refuse(a, tools.ErrBudgetExceeded, t.budgetMessage(gate))
	}
	// 5. argument validation, before anything is asked of the user: a call
	// that cannot run must not be put to them for approval.
	if err != nil {
		return refuse(a, tools.ErrValidation, "arguments are not JSON-encodable")
	}
	if verr := tool.ValidateArgs(a.raw); verr != nil {
		return refuse(a, tools.ErrValidation, verr.Error())
	}
	if a.digest != "" {
		a.act = t.actionOf(tool.Name, a.digest) // its idempotency key (idempotency.go)
	}
	// A turn has at most one terminal answer.
	if a.terminal && !t.reserveTerminal() {
		return refuse(a, tools.ErrConflict, "this turn already has a terminal call; its result ends the turn")
	}
	// 6. untrusted context (untrusted.go): a sensitive call after untrusted
	// output needs the user's approval, or, when it acts against the user,
	// is refused.
	ask, asked := tool.RequiresConfirmation, ""
	if after != "" && tool.IsSensitive() {
		if tool.BlocksUser {
			t.releaseTerminal(a)
			return t.refuseUntrusted(ctx, c, a, after)
		}
		t.o.Metrics.UntrustedCall(a.label, metrics.UntrustedConfirm)
		ask, asked = true, after
	}
	// 7. confirmation, of a call that would run as it stands: an action
	// that already succeeded in the turn will not run (it is answered from
	// the ledger), so nobody is asked.
	if ask && a.act != nil && a.tool.Category == tools.CategoryAction && a.act.doneHere() {
		ask = false
	}
	if ask {
		r := t.confirm(ctx, c, a, asked, ev)
		if r.refusal != nil {
			t.releaseTerminal(a)
		}
		return r // approved: with the approved action's key
	}
	return a
}

func (t *Turn) takeBudget(tool *tools.Tool, exempt bool) (metrics.Gate, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if exempt {
		return "", true
	}
	retrieval := tool.Category == tools.CategoryRetrieval
	switch {
	case t.total >= t.budget.MaxCalls:
		return metrics.GateTotal, false
	case retrieval && t.retrieval >= t.budget.MaxRetrieval:
		return metrics.GateRetrieval, false
	}
	t.total++
	if retrieval {
		t.retrieval++
	}
	return "", true
}

func (t *Turn) budgetMessage(gate metrics.Gate) string {
	n := t.budget.MaxCalls
	what := "tool calls"
	if gate == metrics.GateRetrieval {
		n, what = t.budget.MaxRetrieval, "retrieval calls"
	}
	return fmt.Sprintf("the limit of %d %s per turn in %s mode is reached; answer with what you already have "+
		"or tell the user what you could not do", n, what, t.s.Mode)
}

func (t *Turn) reserveTerminal() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.terminalBusy || t.end != nil {
		return false
	}
	t.terminalBusy = true
	return true
}

func (t *Turn) releaseTerminal(a admission) {
	if !a.terminal {
		return
	}
	t.mu.Lock()
	t.terminalBusy = false
	t.mu.Unlock()
}

// confirm consumes the user's approval for exactly this call, or asks for
// one. after is set when the approval is needed only because untrusted
// output of that tool came first in the turn.
func (t *Turn) confirm(ctx context.Context, c Call, a admission, after string, ev Events) admission {
	if t.o.Confirms == nil || a.digest == "" {
		if after != "" && !a.tool.RequiresConfirmation {
			return t.refuseUntrusted(ctx, c, a, after)
		}
		return refuse(a, tools.ErrConfirmationRequired, "this tool needs the user's approval, which cannot be asked for here")
	}
	conf := Confirmation{
		Token: newConfirmToken(), SessionID: t.s.ID, Epoch: t.s.Epoch, UserID: t.s.UserID, Tool: c.Name,
		ArgsDigest: a.digest, Args: redactedArgs(t.reg, c.Name, c.Args), Turn: t.n, IdempotencyKey: a.act.key,
		// Whole seconds, rounded up: the user never gets less than the TTL.
		ExpiresAt: t.o.cfg.Now().Add(t.o.cfg.ConfirmTTL).UTC().Truncate(time.Second).Add(time.Second),
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.o.cfg.StoreTimeout)
	approved, key, err := t.o.Confirms.ConsumeOrRequest(sctx, conf)
	cancel()
	switch {
	case errors.Is(err, ErrFenced):
		t.takenOver("confirmation")
		return refuse(a, tools.ErrTransient, "the session was taken over by another connection")
	case err != nil:
		t.o.Log.WarnContext(ctx, "confirmation store unavailable", "session", t.s.ID, "tool", c.Name, "err", err)
		return refuse(a, tools.ErrTransient, "the user's approval could not be checked right now; tell the user "+
			"and try again in a later turn")
	case approved:
		if key != "" {
			// The approved run is the action the user approved: same key.
			a.act = t.adopt(c.Name, a.digest, key)
		}
		t.o.Metrics.Confirmation(metrics.ConfirmConsumed)
		traceAttr(ctx, tracing.AttrToolConfirm.String("approved"))
		return a
	}
	if t.ledger.state(c.ID) == StateCancelled {
		// The model withdrew the call meanwhile: nobody is asked, and the
		// stored request goes away.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.o.cfg.StoreTimeout)
		_, _ = t.o.Confirms.Resolve(sctx, t.s.ID, t.s.Epoch, t.s.UserID, conf.Token, false, 0)
		cancel()
		return refuse(a, tools.ErrTransient, "the call was cancelled")
	}
	t.o.Metrics.Confirmation(metrics.ConfirmRequested)
	traceAttr(ctx, tracing.AttrToolConfirm.String("asked"))
	if ev != nil {
		ev.ConfirmRequested(conf)
	}
	if after != "" {
		a = refuse(a, tools.ErrConfirmationRequired, untrustedConfirmMessage(c.Name, after, conf.Token))
		a.refusal.Error.Code = CodeUntrustedContext
		return a
	}
	return refuse(a, tools.ErrConfirmationRequired, fmt.Sprintf("the user must approve this call first; a "+
		"confirmation (token %s) is shown to them. Do not call %s again until they answer; you will be told.",
		conf.Token, c.Name))
}
