package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/loopdetect"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tracing"
)

// Session identifies who a turn belongs to.
type Session struct {
	ID     string
	UserID string
	Mode   protocol.Mode
	// Channel is what the session came by (a browser, a phone carrier):
	// its tool calls' metric label.
	Channel metrics.Channel
	// Epoch is the generation of the connection that owns the session
	// (store.Record.Epoch): every ledger and confirmation write carries
	// it, and the store refuses one from an older owner (ErrFenced).
	Epoch int64
	// TakenOver, when set, is called (from any goroutine, maybe more than
	// once) when such a write was refused: another connection owns the
	// session now, and this one must end.
	TakenOver func()
	// Tools is the registry the session pinned at its start; nil means the
	// orchestrator's own (Deps.Registry).
	Tools *tools.Registry
	// Stats are the session's figures, which Turn.End adds the turn's tool
	// calls to; nil: none.
	Stats *metrics.SessionStats
	// Log is the session's logger, for the line Turn.End writes; nil: the
	// orchestrator's, with the session's ID.
	Log *slog.Logger
	// Claims are the user's token claims forwarded to tools
	// (tools.Call.Claims); nil when none.
	Claims tools.Claims
	// Budgets replace the orchestrator's per-turn budgets (Config.Text,
	// Config.Voice) for the session's turns, by mode; a mode left out, or
	// nil, keeps the orchestrator's. An assistant profile sets them.
	Budgets map[protocol.Mode]Budget
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

// End says that a tool ended the turn, and with which final answer: a
// terminal tool's output (protocol.ReasonTerminalTool), or the note of a
// handler's termination, tools.Terminate, which is how finish ends a run
// (protocol.ReasonFinish).
type End struct {
	Reason protocol.TurnEnd // protocol.ReasonTerminalTool or protocol.ReasonFinish
	Text   string
	CallID string // the call that ended the turn
}

// Turn is the orchestrator's state for one turn of one session: its gates,
// its call ledger, its terminal state and the intents its tools returned.
type Turn struct {
	o      *Orchestrator
	s      Session
	reg    *tools.Registry
	n      int
	budget Budget
	loops  *loopdetect.Detector
	ledger ledger
	// fenced: a store write of the turn was refused for a newer owner;
	// nothing of the turn runs or is recorded any more.
	fenced atomic.Bool
	// began is when the turn started (NewTurn), on the orchestrator's
	// clock; ended is set by the first End.
	began time.Time
	ended atomic.Bool

	mu               sync.Mutex
	retrieval, total int
	rounds           int
	terminalBusy     bool   // a terminal call is admitted and not failed
	untrusted        string // the first tool whose untrusted output reached the model (untrusted.go)
	end              *End
	intents          []intents.Intent
	actions          map[string]*action // by tool and argument digest (idempotency.go)
}

// NewTurn starts turn n of a session. loops carries the session's loop
// history across turns; nil gives the turn a history of its own.
func (o *Orchestrator) NewTurn(s Session, n int, loops *loopdetect.Detector) *Turn {
	if loops == nil {
		loops = loopdetect.New(o.cfg.LoopTurns)
	}
	b := o.cfg.Text
	if s.Mode == protocol.ModeVoice {
		b = o.cfg.Voice
	}
	if own, ok := s.Budgets[s.Mode]; ok {
		b = own
	}
	reg := s.Tools
	if reg == nil {
		reg = o.Registry
	}
	return &Turn{o: o, s: s, reg: reg, n: n, budget: b, loops: loops, began: o.cfg.Now()}
}

// Number is the turn's number in its session.
func (t *Turn) Number() int { return t.n }

// Channel is what the turn's session came by (its metrics' channel label).
func (t *Turn) Channel() metrics.Channel { return t.s.Channel }

// Handle runs the calls of one model message: each is admitted in arrival
// order (lookup, mode, loop detection, gates, validation, confirmation),
// the admitted ones run concurrently, and one Result per call comes back in
// the calls' order. Before anything runs, the calls are claimed in the
// durable ledger: a call ID the session answered before is answered again
// with the same response, and one that was started before but never
// answered (a node died) is answered with an error instead of running
// twice.
func (t *Turn) Handle(ctx context.Context, calls []Call, ev Events) []Result {
	results := make([]Result, len(calls))
	fresh := make([]bool, len(calls))
	for i := range calls {
		c := calls[i]
		c.SessionID, c.UserID, c.Mode, c.Turn = t.s.ID, t.s.UserID, t.s.Mode, t.n
		results[i].Call = c
		if !t.ledger.receive(c.ID) {
			t.o.Log.WarnContext(ctx, "duplicate tool call id ignored", "session", t.s.ID, "turn", t.n, "call", c.ID)
			continue
		}
		results[i].Send, fresh[i] = true, true
	}
	prior := t.claim(ctx, results, fresh)
	// The calls of one model message were made before any of their
	// results existed: only output of earlier messages taints them.
	after := t.untrustedSource()
	var wg sync.WaitGroup
	for i := range calls {
		if !fresh[i] {
			continue
		}
		c := results[i].Call
		// Every answered call has an execute_tool span, refused ones too.
		cctx, span := tracing.StartTool(ctx, t.label(c.Name), c.ID)
		if t.fenced.Load() {
			// Another connection owns the session: nothing runs, and
			// nothing is answered.
			results[i].Outcome = t.withdraw(cctx, c, admission{label: t.label(c.Name)}, ev)
			span.End()
			continue
		}
		if rec, ok := prior[c.ID]; ok {
			results[i].Outcome = t.again(cctx, c, rec, ev)
			traceReplay(cctx, results[i].Outcome)
			span.End()
			continue
		}
		if ev != nil {
			ev.CallReceived(c, redactedArgs(t.reg, c.Name, c.Args))
		}
		a := t.admit(cctx, c, after, ev)
		if t.fenced.Load() {
			results[i].Outcome = t.withdraw(cctx, c, a, ev)
			span.End()
			continue
		}
		if a.refusal != nil {
			if !t.ledger.move(c.ID, StateRefused) {
				// Cancelled while it was being admitted: it is reported as
				// cancelled and never answered.
				results[i].Outcome = t.cancelled(cctx, c, a, 0, ev)
				span.End()
				continue
			}
			results[i].Outcome = t.finish(cctx, c, a, *a.refusal, 0, ev)
			span.End()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i].Outcome = t.run(cctx, c, a, ev)
			// The span is cctx's (not captured: the closure stays as small
			// as it was without tracing).
			trace.SpanFromContext(cctx).End()
		}()
	}
	wg.Wait()
	// The first call, in the calls' order, that ended the turn ends it,
	// whichever finished first.
	t.mu.Lock()
	for _, r := range results {
		if t.end == nil && r.Outcome.end != nil {
			t.end = r.Outcome.end
		}
	}
	t.mu.Unlock()
	return results
}

// claim claims the fresh calls in the durable ledger (one round trip) and
// returns the records of IDs the session had claimed before. Without a
// ledger, or when it cannot be reached, nothing is known and every call
// goes ahead: availability wins over deduplication across nodes. A claim
// refused because another connection owns the session (ErrFenced) fences
// the turn: none of the calls runs.
func (t *Turn) claim(ctx context.Context, results []Result, fresh []bool) map[string]CallRecord {
	if t.o.Ledger == nil || t.fenced.Load() {
		return nil
	}
	var recs []CallRecord
	for i, r := range results {
		if fresh[i] {
			recs = append(recs, CallRecord{ID: r.Call.ID, Tool: t.label(r.Call.Name), Turn: t.n, State: StateClaimed})
		}
	}
	if len(recs) == 0 {
		return nil
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.o.cfg.StoreTimeout)
	defer cancel()
	prior, err := t.o.Ledger.Claim(sctx, t.s.ID, t.s.Epoch, recs)
	if errors.Is(err, ErrFenced) {
		t.takenOver("claim")
		return nil
	}
	if err != nil {
		t.o.Log.WarnContext(ctx, "call ledger unavailable: calls run without a durable claim", "session", t.s.ID,
			"turn", t.n, "err", err)
		return nil
	}
	return prior
}

// takenOver fences the turn after a store write (op) was refused because
// another connection owns the session now: that connection goes on with
// it, this one is ending (the session closes it, 4005). It is not a store
// failure, and is logged once per turn.
func (t *Turn) takenOver(op string) {
	if !t.fenced.CompareAndSwap(false, true) {
		return
	}
	t.o.Log.Info("session taken over by another connection: the turn's calls stop here", "session", t.s.ID,
		"turn", t.n, "refused", op)
	if t.s.TakenOver != nil {
		t.s.TakenOver()
	}
}

// withdraw ends a call of a fenced turn without running or answering it:
// it is cancelled, as when the turn ends.
func (t *Turn) withdraw(ctx context.Context, c Call, a admission, ev Events) Outcome {
	t.ledger.cancel(c.ID)
	return t.cancelled(ctx, c, a, 0, ev)
}

// again answers a call whose ID the session has seen before. An answered
// one gets its stored response; one that was claimed but never answered
// may or may not have done its work, so it is answered with an error the
// model can act on rather than run a second time.
func (t *Turn) again(ctx context.Context, c Call, rec CallRecord, ev Events) Outcome {
	if rec.State == StateAnswered && rec.Response != nil && t.ledger.move(c.ID, StateReplayed) {
		t.o.Log.InfoContext(ctx, "tool call answered again from the ledger", "session", t.s.ID, "turn", t.n,
			"call", c.ID, "tool", rec.Tool, "first_turn", rec.Turn)
		if tool, ok := t.reg.Lookup(c.Name); ok {
			t.markUntrusted(tool) // the stored answer reaches the model again
		}
		return Outcome{Response: rec.Response, Replayed: true, Envelope: tools.Envelope{OK: rec.Outcome == "ok"}}
	}
	a := admission{label: t.label(c.Name)}
	env := tools.Fail(tools.ErrTransient, "this call was started before a reconnect and its outcome is unknown: "+
		"it may or may not have taken effect. Check before repeating it with a new call.", false, true)
	a.refusal = &env
	if !t.ledger.move(c.ID, StateRefused) {
		return t.cancelled(ctx, c, a, 0, ev)
	}
	return t.finish(ctx, c, a, env, 0, ev)
}

// label is a tool's metric label: its name, or "unknown".
func (t *Turn) label(name string) string {
	if _, ok := t.reg.Lookup(name); ok {
		return name
	}
	return unknownTool
}

// admission is what steps 1–7 learned about a call.
type admission struct {
	tool     *tools.Tool
	label    string // metric label: the tool name, or "unknown"
	raw      json.RawMessage
	digest   string
	terminal bool
	refusal  *tools.Envelope
	empty    bool    // an empty result (set when it ran)
	act      *action // the action the call is (idempotency.go); nil without a digest
}

// run executes an admitted call (step 7) and finishes it.
func (t *Turn) run(ctx context.Context, c Call, a admission, ev Events) Outcome {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if t.fenced.Load() {
		t.ledger.cancel(c.ID)
	}
	if act := a.act; act != nil && a.tool.Category == tools.CategoryAction {
		// One call of an action at a time; one that already succeeded is
		// answered from the ledger and not run again.
		act.mu.Lock()
		defer act.mu.Unlock()
		if rec, ok := t.succeeded(ctx, act); ok {
			return t.repeat(ctx, c, a, rec, ev)
		}
	}
	if !t.ledger.start(c.ID, cancel) {
		return t.cancelled(ctx, c, a, 0, ev)
	}
	// Debug lines are built only when they are written: the pipeline
	// allocates nothing for them otherwise.
	debug := t.o.Log.Enabled(ctx, slog.LevelDebug)
	if debug {
		t.o.Log.DebugContext(ctx, "executing tool", "session", t.s.ID, "turn", t.n, "tool", a.tool.Name, "call", c.ID)
	}
	// Durations are read on the orchestrator's clock (Config.Now), which
	// tests move.
	start := t.o.cfg.Now()
	call := tools.Call{ID: c.ID, SessionID: t.s.ID, UserID: t.s.UserID, Mode: t.s.Mode, Args: a.raw, Claims: t.s.Claims}
	if a.act != nil {
		call.IdempotencyKey = a.act.key
	}
	env, timedOut := t.o.execute(cctx, a.tool, call)
	d := t.o.cfg.Now().Sub(start)
	if debug && !env.OK {
		t.o.Log.DebugContext(ctx, "tool execution failed", "session", t.s.ID, "turn", t.n, "tool", a.tool.Name, "call", c.ID,
			"error_type", env.Error.Type)
	}
	if soft := a.tool.SoftLatencyIn(t.s.Mode); soft > 0 && d > soft {
		t.o.Metrics.SoftLatencyOverrun(a.tool.Name, t.s.Mode)
		t.o.Log.WarnContext(ctx, "tool call over its soft latency budget", "session", t.s.ID, "turn", t.n, "tool", a.tool.Name,
			"call", c.ID, "mode", t.s.Mode, "duration_ms", d.Milliseconds(), "budget_ms", soft.Milliseconds())
		traceSoftLatency(ctx, d, soft)
	}
	state := StateDone
	if timedOut {
		state = StateTimedOut
	}
	if !t.ledger.move(c.ID, state) {
		return t.cancelled(ctx, c, a, d, ev)
	}
	t.markUntrusted(a.tool)
	var end *End
	if env.OK {
		if env.Terminate != nil {
			// A termination answers the model with its note.
			env.Data = env.Terminate.Text()
		}
		a.empty = loopdetect.IsEmptyResult(env.Data)
		t.loops.RecordResult(t.n, a.tool.Name, a.digest, a.empty)
		end = t.collect(c.ID, a, env)
	} else {
		t.releaseTerminal(a)
	}
	out := t.finish(ctx, c, a, env, d, ev)
	out.end = end
	if env.OK && a.act != nil && a.tool.Category == tools.CategoryAction {
		a.act.done.Store(&CallRecord{ID: c.ID, Tool: a.label, Turn: t.n, State: StateAnswered, Outcome: "ok",
			Response: out.Response, IdempotencyKey: a.act.key})
	}
	return out
}

// collect keeps a successful call's intents (step 11) and returns the end
// of the turn it stands for, if any: a handler's termination, or a
// terminal tool's output.
func (t *Turn) collect(id string, a admission, env tools.Envelope) *End {
	t.mu.Lock()
	t.intents = append(t.intents, env.Intents...)
	t.mu.Unlock()
	switch {
	case env.Terminate != nil:
		return &End{Reason: protocol.ReasonFinish, Text: env.Terminate.Text(), CallID: id}
	case a.terminal:
		return &End{Reason: protocol.ReasonTerminalTool, Text: terminalText(env.Data), CallID: id}
	}
	return nil
}

// cancelled finishes a call whose answer must never be sent.
func (t *Turn) cancelled(ctx context.Context, c Call, a admission, d time.Duration, ev Events) Outcome {
	t.releaseTerminal(a)
	env := tools.Fail(tools.ErrTransient, "the call was cancelled", false, true)
	return t.finish(ctx, c, a, env, d, ev)
}

// responseWrapper is the size of the success envelope around the output,
// which the result budget must leave room for. It is ASCII: as many
// characters as bytes.
var responseWrapper = len(`{"ok":true,"output":,"v":1}`)

// finish shapes the answer (step 9), records metrics (10), and reports the
// call to the session. The durable ledger learns the answer when it is
// sent (see Round).
func (t *Turn) finish(ctx context.Context, c Call, a admission, env tools.Envelope, d time.Duration, ev Events) Outcome {
	// chars is the response's size in characters of its JSON, as seed 004
	// sizes responses (and estimates tokens from); the shaping budget is
	// in bytes.
	var chars int
	out := Outcome{Duration: d, Refused: a.refusal != nil}
	// The tool's own answer, if it is not the gateway's, is marked as
	// untrusted data; the pipeline's refusals are the gateway's words.
	marked := a.refusal == nil && a.tool != nil && !a.tool.TrustedOutput
	wrapper := responseWrapper
	if marked {
		wrapper += untrustedMarkChars
	}
	if env.OK {
		// The budget holds for the whole response, the wrapper included.
		data, n, truncated := shape(env.Data, t.o.cfg.MaxResultBytes-wrapper)
		if a.tool != nil {
			out.Shown = shownFields(a.tool, data)
		}
		if t.s.Mode == protocol.ModeVoice {
			plain := PlainText(data)
			data, n = plain, quotedChars(plain)
		}
		env.Data, env.Meta.Truncated = data, truncated
		chars = wrapper + n
	}
	env.Meta.DurationMs = d.Milliseconds()
	out.Envelope, out.Response = env, modelResponse(env)
	if marked {
		out.Response[UntrustedMarker] = true
	}

	outcome := "ok"
	if !env.OK {
		outcome = strings.ToLower(string(env.Error.Type))
		chars = jsonChars(out.Response)
	}
	t.o.Metrics.ObserveToolCall(a.label, outcome, t.s.Channel, d, chars)
	if env.OK && chars > metrics.ResultSizeWarnChars {
		t.o.warnOversize(a.label, chars)
	}
	if env.OK {
		t.o.Log.DebugContext(ctx, "tool call done", "session", t.s.ID, "turn", t.n, "tool", a.label, "call", c.ID,
			"duration_ms", d.Milliseconds())
	} else {
		t.o.Log.InfoContext(ctx, "tool call answered with an error", "session", t.s.ID, "turn", t.n, "tool", a.label,
			"call", c.ID, "error_type", env.Error.Type, "refused", out.Refused, "state", t.ledger.state(c.ID))
	}
	traceOutcome(ctx, t.reg, c, out, chars)
	rec := CallRecord{ID: c.ID, Tool: a.label, Turn: t.n, Outcome: outcome, ArgsDigest: a.digest,
		DurationMs: d.Milliseconds(), Empty: a.empty, Response: out.Response}
	if a.act != nil && a.refusal == nil && a.tool.Category == tools.CategoryAction {
		rec.IdempotencyKey = a.act.key // a success is found by it (LedgerStore.Succeeded)
	}
	t.ledger.setRecord(c.ID, rec)
	if ev != nil {
		ev.CallFinished(c, out)
	}
	return out
}

// shownFields is what the browser may see of an output: the fields of an
// object output that the tool's result allow-list names.
func shownFields(tool *tools.Tool, data any) map[string]any {
	if len(tool.Redact.Result) == 0 {
		return nil
	}
	obj, ok := tool.RedactResult(data).(map[string]any)
	if !ok {
		return nil
	}
	out := map[string]any{}
	for _, k := range tool.Redact.Result {
		if v, ok := obj[k]; ok {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Answer marks a call answered, as Round does just before a response is
// sent upstream. It reports false for a call that was cancelled, unknown, or
// already answered: nothing may be sent for it.
func (t *Turn) Answer(id string) bool {
	_, ok := t.ledger.answer(id)
	return ok
}

// State is where a call of the turn is in its life ("" for an unknown ID).
func (t *Turn) State(id string) CallState { return t.ledger.state(id) }

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

// End is the end of the turn, the one place a turn is recorded, for text
// and voice alike: every call of the turn not finished yet is cancelled
// (nothing of it may run on, and none of it is answered any more), and the
// turn is counted with its reason (the turn.done reason), its duration from
// NewTurn on the orchestrator's clock and its tool calls
// (turnstile_turns_total, turnstile_turn_duration_seconds,
// turnstile_tool_calls_per_turn, the session's Stats), and logged. Only the
// first End records anything; it reports whether this call was it. ctx is
// the turn's (its log line carries the turn's trace).
func (t *Turn) End(ctx context.Context, reason protocol.TurnEnd) bool {
	t.CancelAll()
	if !t.ended.CompareAndSwap(false, true) {
		return false
	}
	d := t.o.cfg.Now().Sub(t.began)
	calls := t.Calls()
	if t.o.Metrics != nil {
		t.o.Metrics.ObserveTurn(t.s.Mode, reason, t.s.Channel, d, calls)
	}
	if t.s.Stats != nil {
		t.s.Stats.AddToolCalls(calls)
	}
	sessionLog(t.o, t.s).InfoContext(ctx, "turn done", "turn", t.n, "mode", t.s.Mode, "reason", reason, "tool_calls", calls,
		"duration_ms", d.Milliseconds())
	return true
}

// Terminated reports whether a terminal tool or a handler's termination
// (finish) ended the turn, and with which answer.
func (t *Turn) Terminated() (End, bool) {
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
