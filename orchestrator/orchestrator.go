// Package orchestrator runs every tool call the model makes through the
// gateway's pipeline (DESIGN §6), in this order: lookup, mode restriction,
// loop detection, per-turn gates, argument validation, untrusted context (a
// sensitive tool after untrusted tool output in the turn: untrusted.go),
// confirmation (so that the user is never asked to approve a call that could not run),
// execution with a hard timeout and panic recovery, envelope validation,
// result shaping, metrics and the call ledger, and intent collection. Every
// call gets exactly one answer for the model, refused or not, and a call
// that was cancelled or seen twice is never answered.
package orchestrator

import (
	"context"
	"log/slog"
	"time"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/throttle"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
)

// unknownTool is the metric label of calls to tools that do not exist, so
// that a model inventing names cannot grow label cardinality.
const unknownTool = "unknown"

// DefaultMaxResultBytes bounds the JSON of one result sent to the model.
const DefaultMaxResultBytes = 64 << 10

// Budget is the per-turn gate of one mode (the policy's type).
type Budget = tools.Budget

// Config is the orchestrator's policy. Zero values get the defaults noted.
type Config struct {
	// Budgets are the per-turn gates and the confirmations' life: the
	// package's own settings (settings.go).
	Budgets
	// MaxResultBytes bounds the JSON of one response to the model; default
	// 64 KiB.
	MaxResultBytes int
	// LoopTurns is how many turns of loop-detection history a session keeps;
	// default 5.
	LoopTurns int
	// StoreTimeout bounds one ledger or confirmation round trip; default 1 s.
	StoreTimeout time.Duration
	// Now is the clock confirmations expire by and tool calls are timed
	// by (latency, soft budgets); default the system clock.
	Now func() time.Time
}

func (c *Config) defaults() {
	if c.Text == (Budget{}) {
		c.Text = tools.DefaultBudget(protocol.ModeText)
	}
	if c.Voice == (Budget{}) {
		c.Voice = tools.DefaultBudget(protocol.ModeVoice)
	}
	if c.MaxResultBytes <= 0 {
		c.MaxResultBytes = DefaultMaxResultBytes
	}
	if c.LoopTurns <= 0 {
		c.LoopTurns = 5
	}
	if c.StoreTimeout <= 0 {
		c.StoreTimeout = time.Second
	}
	if c.ConfirmTTL <= 0 {
		c.ConfirmTTL = 2 * time.Minute
	}
	if c.Now == nil {
		c.Now = clock.Wall.Now
	}
}

// Deps are what the orchestrator talks to. Ledger and Confirms may be nil:
// then calls are not recorded, and tools that require confirmation are
// always refused.
type Deps struct {
	Registry *tools.Registry
	Metrics  *metrics.Metrics
	Log      *slog.Logger
	Ledger   LedgerStore
	Confirms ConfirmStore
}

// Orchestrator executes tool calls against a registry under a policy.
type Orchestrator struct {
	cfg Config
	Deps
	oversize throttle.Keyed // per tool name: results over the size warning
}

// New returns an orchestrator with the default policy and no stores.
func New(reg *tools.Registry, m *metrics.Metrics, log *slog.Logger) *Orchestrator {
	return NewWith(Config{}, Deps{Registry: reg, Metrics: m, Log: log})
}

// NewWith returns an orchestrator with the given policy and stores.
func NewWith(cfg Config, d Deps) *Orchestrator {
	cfg.defaults()
	return &Orchestrator{cfg: cfg, Deps: d}
}

// Config returns the effective policy.
func (o *Orchestrator) Config() Config { return o.cfg }

// Call is one tool call in a session's turn.
type Call struct {
	ID   string
	Name string
	Args map[string]any
	// ArgsError is set when the model's arguments could not be read (e.g.
	// not JSON); the call is answered with a VALIDATION error and never
	// runs. It never carries the arguments themselves.
	ArgsError string
	SessionID string
	UserID    string
	Mode      protocol.Mode
	Turn      int
}

// Outcome is the answer to one call.
type Outcome struct {
	Envelope tools.Envelope
	Duration time.Duration
	// Response is what the model is sent, the versioned envelope (see
	// modelResponse).
	Response map[string]any
	// Refused is true when the pipeline answered without running the tool.
	Refused bool
	// Replayed is true for a call this session had answered before: its
	// Response is the stored one and nothing ran.
	Replayed bool
	// Repeated is true for a call of an action tool that had already
	// succeeded with the same idempotency key (idempotency.go): its
	// Response is that success's and nothing ran.
	Repeated bool
	// Shown is what the browser may see of a successful object output: its
	// fields on the tool's result allow-list (nil when there are none).
	Shown map[string]any

	end *End // the end of the turn this call stands for, if it succeeded
}

// RedactedArgs returns the arguments as the browser and logs may see them:
// only the keys the tool's allow-list names keep their values. Arguments of
// unknown tools are all redacted.
func (o *Orchestrator) RedactedArgs(name string, args map[string]any) map[string]any {
	return redactedArgs(o.Registry, name, args)
}

func redactedArgs(reg *tools.Registry, name string, args map[string]any) map[string]any {
	if t, ok := reg.Lookup(name); ok {
		return t.RedactArgs(args)
	}
	out := make(map[string]any, len(args))
	for k := range args {
		out[k] = tools.Redacted
	}
	return out
}

// Execute runs one call as a turn of its own (fresh gates and loop state).
// Sessions use NewTurn so that gates and loop detection span the turn.
func (o *Orchestrator) Execute(ctx context.Context, c Call) Outcome {
	t := o.NewTurn(Session{ID: c.SessionID, UserID: c.UserID, Mode: c.Mode}, c.Turn, nil)
	res := t.Handle(ctx, []Call{c}, nil)
	return res[0].Outcome
}

// EnvelopeVersion is the version of the response envelope models get.
const EnvelopeVersion = 1

// modelResponse is the envelope a model is sent for a call:
//
//	{"v":1,"ok":true,"output":…}
//	{"v":1,"ok":false,"error":{"type","code"?,"message","retryable"},"partialSideEffects":true}
//
// partialSideEffects appears only when it is true (the call may have done
// something before it failed). A successful call without data answers "ok".
func modelResponse(env tools.Envelope) map[string]any {
	if env.OK {
		data := env.Data
		if data == nil {
			data = "ok"
		}
		return map[string]any{"v": EnvelopeVersion, "ok": true, "output": data}
	}
	e := map[string]any{"type": string(env.Error.Type), "message": env.Error.Message, "retryable": env.Error.Retryable}
	if env.Error.Code != "" {
		e["code"] = env.Error.Code
	}
	m := map[string]any{"v": EnvelopeVersion, "ok": false, "error": e}
	if env.Error.PartialSideEffects {
		m["partialSideEffects"] = true
	}
	return m
}

// warnOversize logs, at most once a minute per tool, that the tool's p95
// result size (in characters) is over the spec's warning size
// (metrics.ResultSizeWarnChars):
// such results bloat every later request. It is called for a result over
// that size, the only kind that can push the p95 over it; one large result
// among small ones is not worth a line.
func (o *Orchestrator) warnOversize(tool string, chars int) {
	p95 := o.Metrics.Summary.SizeP95(tool)
	if p95 <= metrics.ResultSizeWarnChars {
		return
	}
	if n, ok := o.oversize.Note(tool, o.cfg.Now(), 1); ok {
		o.Log.Warn("tool result size p95 over the size warning", "tool", tool, "p95_chars", p95, "chars", chars,
			"warning_chars", metrics.ResultSizeWarnChars, "count", n)
	}
}
