package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/loopdetect"
	"github.com/turnstile-gw/turnstile/tools"
)

// FinishTool is the built-in tool that ends a run; its message is the
// turn's final answer.
const FinishTool = "finish"

// Turn-end reasons a tool can cause.
const (
	EndTerminalTool = "terminal_tool"
	EndFinish       = "finish"
)

// Session identifies who a turn belongs to.
type Session struct {
	ID     string
	UserID string
	Mode   string
}

// Events lets the session show calls as they move through the pipeline.
// Methods are called from several goroutines.
type Events interface {
	CallReceived(c Call, redactedArgs map[string]any)
	CallFinished(c Call, o Outcome)
	ConfirmRequested(c Confirmation)
}

// Result is one call's outcome. Send is false for a duplicate call ID:
// nothing may be sent upstream for it.
type Result struct {
	Call    Call
	Outcome Outcome
	Send    bool
}

// End says that a tool ended the turn, and with which final answer.
type End struct {
	Reason string // EndTerminalTool or EndFinish
	Text   string
	CallID string // the call that ended the turn
}

// Turn is the orchestrator's state for one turn of one session: its gates,
// its call ledger, its terminal state and the intents its tools returned.
type Turn struct {
	o      *Orchestrator
	s      Session
	n      int
	budget Budget
	loops  *loopdetect.Detector
	ledger ledger

	mu               sync.Mutex
	retrieval, total int
	terminalBusy     bool // a terminal call is admitted and not failed
	end              *End
	intents          []intents.Intent
}

// NewTurn starts turn n of a session. loops carries the session's loop
// history across turns; nil gives the turn a history of its own.
func (o *Orchestrator) NewTurn(s Session, n int, loops *loopdetect.Detector) *Turn {
	if loops == nil {
		loops = loopdetect.New(o.cfg.LoopTurns)
	}
	b := o.cfg.Text
	if s.Mode == "voice" {
		b = o.cfg.Voice
	}
	return &Turn{o: o, s: s, n: n, budget: b, loops: loops}
}

// Handle runs the calls of one model message: each is admitted in arrival
// order (lookup, mode, gates, loop detection, confirmation, validation),
// the admitted ones run concurrently, and one Result per call comes back in
// the calls' order.
func (t *Turn) Handle(ctx context.Context, calls []Call, ev Events) []Result {
	results := make([]Result, len(calls))
	var wg sync.WaitGroup
	for i := range calls {
		c := calls[i]
		c.SessionID, c.UserID, c.Mode, c.Turn = t.s.ID, t.s.UserID, t.s.Mode, t.n
		results[i].Call = c
		if !t.ledger.receive(c.ID) {
			t.o.Log.Warn("duplicate tool call id ignored", "session", t.s.ID, "turn", t.n, "call", c.ID)
			continue
		}
		results[i].Send = true
		if ev != nil {
			ev.CallReceived(c, t.o.RedactedArgs(c.Name, c.Args))
		}
		a := t.admit(ctx, c, ev)
		if a.refusal != nil {
			if !t.ledger.move(c.ID, StateRefused) {
				// Cancelled while it was being admitted: it is reported as
				// cancelled and never answered.
				results[i].Outcome = t.cancelled(ctx, c, a, 0, ev)
				continue
			}
			results[i].Outcome = t.finish(ctx, c, a, *a.refusal, 0, ev)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i].Outcome = t.run(ctx, c, a, ev)
		}()
	}
	wg.Wait()
	return results
}

// admission is what steps 1–6 learned about a call.
type admission struct {
	tool     *tools.Tool
	label    string // metric label: the tool name, or "unknown"
	raw      json.RawMessage
	digest   string
	terminal bool
	refusal  *tools.Envelope
}

func refuse(a admission, t tools.ErrorType, msg string, retryable bool) admission {
	env := tools.Fail(t, msg, retryable, false)
	a.refusal = &env
	return a
}

func (t *Turn) admit(ctx context.Context, c Call, ev Events) admission {
	a := admission{label: unknownTool}
	// 1. lookup
	tool, ok := t.o.Registry.Lookup(c.Name)
	if !ok {
		return refuse(a, tools.ErrNotFound, "there is no tool with that name; use one of the declared tools", false)
	}
	a.tool, a.label = tool, tool.Name
	a.terminal = tool.Terminal || tool.Name == FinishTool
	// 2. mode restriction
	if !tool.AllowedIn(t.s.Mode) {
		return refuse(a, tools.ErrModeRestricted, fmt.Sprintf("%s is not available in %s mode", tool.Name, t.s.Mode), false)
	}
	// 3. per-turn gates, counted in arrival order. Tools that end the turn
	// are exempt: a model out of budget must still be able to finish.
	if gate, ok := t.takeBudget(tool, a.terminal || tool.Name == "end_voice_session"); !ok {
		t.o.Metrics.GateRefusals.WithLabelValues(gate, t.s.Mode).Inc()
		return refuse(a, tools.ErrBudgetExceeded, t.budgetMessage(gate), false)
	}
	// 4. loop detection on canonical arguments
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
			t.o.Metrics.LoopDetections.WithLabelValues(string(rule)).Inc()
			return refuse(a, tools.ErrLoopDetected, t.loops.Feedback(rule, tool.Name), false)
		}
	}
	// A turn has at most one terminal answer.
	if a.terminal && !t.reserveTerminal() {
		return refuse(a, tools.ErrConflict, "this turn already has a terminal call; its result ends the turn", false)
	}
	// 5. confirmation
	if tool.RequiresConfirmation {
		if r := t.confirm(ctx, c, a, ev); r.refusal != nil {
			t.releaseTerminal(a)
			return r
		}
	}
	// 6. argument validation
	if err != nil {
		t.releaseTerminal(a)
		return refuse(a, tools.ErrValidation, "arguments are not JSON-encodable", false)
	}
	if verr := tool.ValidateArgs(a.raw); verr != nil {
		t.releaseTerminal(a)
		return refuse(a, tools.ErrValidation, verr.Error(), false)
	}
	return a
}

func (t *Turn) takeBudget(tool *tools.Tool, exempt bool) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if exempt {
		return "", true
	}
	retrieval := tool.Category == tools.CategoryRetrieval
	switch {
	case t.total >= t.budget.MaxCalls:
		return "total", false
	case retrieval && t.retrieval >= t.budget.MaxRetrieval:
		return "retrieval", false
	}
	t.total++
	if retrieval {
		t.retrieval++
	}
	return "", true
}

func (t *Turn) budgetMessage(gate string) string {
	n := t.budget.MaxCalls
	what := "tool calls"
	if gate == "retrieval" {
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
// one.
func (t *Turn) confirm(ctx context.Context, c Call, a admission, ev Events) admission {
	if t.o.Confirms == nil || a.digest == "" {
		return refuse(a, tools.ErrConfirmationRequired, "this tool needs the user's approval, which cannot be asked for here", false)
	}
	conf := Confirmation{
		Token: newConfirmToken(), SessionID: t.s.ID, UserID: t.s.UserID, Tool: c.Name,
		ArgsDigest: a.digest, Args: t.o.RedactedArgs(c.Name, c.Args), Turn: t.n,
		// Whole seconds, rounded up: the user never gets less than the TTL.
		ExpiresAt: time.Now().Add(t.o.cfg.ConfirmTTL).UTC().Truncate(time.Second).Add(time.Second),
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.o.cfg.StoreTimeout)
	approved, err := t.o.Confirms.ConsumeOrRequest(sctx, conf)
	cancel()
	switch {
	case err != nil:
		t.o.Log.Warn("confirmation store unavailable", "session", t.s.ID, "tool", c.Name, "err", err)
		return refuse(a, tools.ErrTransient, "the user's approval could not be checked; try again shortly", true)
	case approved:
		t.o.Metrics.Confirmations.WithLabelValues("consumed").Inc()
		return a
	}
	if t.ledger.state(c.ID) == StateCancelled {
		// The model withdrew the call meanwhile: nobody is asked, and the
		// stored request goes away.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.o.cfg.StoreTimeout)
		_, _ = t.o.Confirms.Resolve(sctx, t.s.ID, t.s.UserID, conf.Token, false, 0)
		cancel()
		return refuse(a, tools.ErrTransient, "the call was cancelled", true)
	}
	t.o.Metrics.Confirmations.WithLabelValues("requested").Inc()
	if ev != nil {
		ev.ConfirmRequested(conf)
	}
	return refuse(a, tools.ErrConfirmationRequired, fmt.Sprintf("the user must approve this call first; a "+
		"confirmation (token %s) is shown to them. Do not call %s again until they answer; you will be told.",
		conf.Token, c.Name), false)
}

// run executes an admitted call (step 7) and finishes it.
func (t *Turn) run(ctx context.Context, c Call, a admission, ev Events) Outcome {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if !t.ledger.start(c.ID, cancel) {
		return t.cancelled(ctx, c, a, 0, ev)
	}
	start := time.Now()
	env, timedOut := t.o.execute(cctx, a.tool, tools.Call{ID: c.ID, SessionID: t.s.ID, UserID: t.s.UserID,
		Mode: t.s.Mode, Args: a.raw})
	d := time.Since(start)
	if soft := t.softLatency(a.tool); soft > 0 && d > soft {
		t.o.Metrics.SoftLatencyExceeded.WithLabelValues(a.tool.Name, t.s.Mode).Inc()
		t.o.Log.Warn("tool call over its soft latency budget", "session", t.s.ID, "turn", t.n, "tool", a.tool.Name,
			"call", c.ID, "duration_ms", d.Milliseconds(), "budget_ms", soft.Milliseconds())
	}
	state := StateDone
	if timedOut {
		state = StateTimedOut
	}
	if !t.ledger.move(c.ID, state) {
		return t.cancelled(ctx, c, a, d, ev)
	}
	if env.OK {
		t.loops.RecordResult(t.n, a.tool.Name, loopdetect.IsEmptyResult(env.Data))
		t.collect(c.ID, a, env)
	} else {
		t.releaseTerminal(a)
	}
	return t.finish(ctx, c, a, env, d, ev)
}

func (t *Turn) softLatency(tool *tools.Tool) time.Duration {
	switch {
	case tool.SoftLatencyMs > 0:
		return time.Duration(tool.SoftLatencyMs) * time.Millisecond
	case tool.Category != tools.CategoryRetrieval:
		return 0
	case t.s.Mode == "voice":
		return t.o.cfg.SoftLatencyVoice
	default:
		return t.o.cfg.SoftLatencyText
	}
}

// collect keeps a successful call's intents and terminal answer (step 11).
func (t *Turn) collect(id string, a admission, env tools.Envelope) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.intents = append(t.intents, env.Intents...)
	if a.terminal && t.end == nil {
		reason := EndTerminalTool
		if a.tool.Name == FinishTool {
			reason = EndFinish
		}
		t.end = &End{Reason: reason, Text: terminalText(env.Data), CallID: id}
	}
}

// cancelled finishes a call whose answer must never be sent.
func (t *Turn) cancelled(ctx context.Context, c Call, a admission, d time.Duration, ev Events) Outcome {
	t.releaseTerminal(a)
	env := tools.Fail(tools.ErrTransient, "the call was cancelled", true, true)
	return t.finish(ctx, c, a, env, d, ev)
}

// finish shapes the answer (step 9), records metrics and the ledger (10),
// and reports the call to the session.
func (t *Turn) finish(ctx context.Context, c Call, a admission, env tools.Envelope, d time.Duration, ev Events) Outcome {
	if env.OK {
		// The budget holds for the whole response, {"output": …} included.
		data, truncated := Shape(env.Data, t.o.cfg.MaxResultBytes-len(`{"output":}`))
		if t.s.Mode == "voice" {
			data = PlainText(data)
		}
		env.Data, env.Meta.Truncated = data, truncated
	}
	env.Meta.DurationMs = d.Milliseconds()
	out := Outcome{Envelope: env, Duration: d, Response: modelResponse(env), Refused: a.refusal != nil}

	outcome := "ok"
	if !env.OK {
		outcome = strings.ToLower(string(env.Error.Type))
	}
	size := 0
	if b, err := json.Marshal(out.Response); err == nil {
		size = len(b)
	}
	t.o.Metrics.ObserveToolCall(a.label, outcome, d, size)

	state := t.ledger.state(c.ID)
	if t.o.Ledger != nil {
		rec := CallRecord{ID: c.ID, Tool: a.label, State: state, Outcome: outcome, ArgsDigest: a.digest,
			DurationMs: d.Milliseconds(), Empty: env.OK && loopdetect.IsEmptyResult(env.Data)}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.o.cfg.StoreTimeout)
		if err := t.o.Ledger.RecordCall(sctx, t.s.ID, t.n, rec); err != nil {
			t.o.Log.Warn("call ledger write failed", "session", t.s.ID, "turn", t.n, "call", c.ID, "err", err)
		}
		cancel()
	}
	if env.OK {
		t.o.Log.Debug("tool call done", "session", t.s.ID, "turn", t.n, "tool", a.label, "call", c.ID,
			"duration_ms", d.Milliseconds())
	} else {
		t.o.Log.Info("tool call answered with an error", "session", t.s.ID, "turn", t.n, "tool", a.label,
			"call", c.ID, "error_type", env.Error.Type, "refused", out.Refused, "state", state)
	}
	if ev != nil {
		ev.CallFinished(c, out)
	}
	return out
}

// Answer marks a call answered just before its response is sent upstream.
// It reports false for a call that was cancelled, unknown, or already
// answered: nothing may be sent for it.
func (t *Turn) Answer(id string) bool { return t.ledger.move(id, StateAnswered) }

// Cancel cancels calls (upstream toolCallCancellation); running handlers see
// their context end and their answers are never sent.
func (t *Turn) Cancel(ids ...string) {
	for _, id := range ids {
		t.ledger.cancel(id)
	}
}

// CancelAll cancels every call of the turn that has not finished (barge-in,
// the turn ending).
func (t *Turn) CancelAll() { t.Cancel(t.ledger.ids()...) }

// End reports whether a terminal tool or finish ended the turn.
func (t *Turn) End() (End, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.end == nil {
		return End{}, false
	}
	return *t.end, true
}

// Intents returns the intents of the turn's successful calls, in the order
// the calls finished.
func (t *Turn) Intents() []intents.Intent {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]intents.Intent(nil), t.intents...)
}

// Calls is the number of calls the gates counted in this turn.
func (t *Turn) Calls() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total
}

// terminalText is the final answer a terminal tool's data stands for: a
// string as is, else its "text" or "message" field, else its JSON.
func terminalText(data any) string {
	switch v := data.(type) {
	case string:
		return v
	case map[string]any:
		for _, k := range []string{"text", "message"} {
			if s, ok := v[k].(string); ok {
				return s
			}
		}
	}
	b, _ := json.Marshal(data)
	return string(b)
}

func nonNil(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
