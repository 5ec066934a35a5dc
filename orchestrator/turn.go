package orchestrator

import (
	"context"
	"encoding/json"
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
	empty    bool // an empty result (set when it ran)
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
		a.empty = loopdetect.IsEmptyResult(env.Data)
		t.loops.RecordResult(t.n, a.tool.Name, a.empty)
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
	const wrapper = len(`{"output":}`)
	var size int // of the response's JSON, for the metrics
	if env.OK {
		// The budget holds for the whole response, the wrapper included.
		data, n, truncated := shape(env.Data, t.o.cfg.MaxResultBytes-wrapper)
		if t.s.Mode == "voice" {
			plain := PlainText(data)
			data, n = plain, quotedSize(plain)
		}
		env.Data, env.Meta.Truncated = data, truncated
		size = wrapper + n
	}
	env.Meta.DurationMs = d.Milliseconds()
	out := Outcome{Envelope: env, Duration: d, Response: modelResponse(env), Refused: a.refusal != nil}

	outcome := "ok"
	if !env.OK {
		outcome = strings.ToLower(string(env.Error.Type))
		size = jsonSize(out.Response)
	}
	t.o.Metrics.ObserveToolCall(a.label, outcome, d, size)

	state := t.ledger.state(c.ID)
	if t.o.Ledger != nil {
		rec := CallRecord{ID: c.ID, Tool: a.label, State: state, Outcome: outcome, ArgsDigest: a.digest,
			DurationMs: d.Milliseconds(), Empty: a.empty}
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
