// Package textturn is the text agent loop of one turn: stream the model's
// answer to the browser, run the function calls it asks for through the
// orchestrator's Round, send the results back, and repeat until a final
// answer, a tool that ends the turn, or the iteration limit. It reaches the
// session only through Host, so it is tested with a fake host and a fake
// model.
package textturn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/stages"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tracing"
	"github.com/turnstile-gw/turnstile/transport"
)

// Host is the session as a text turn sees it.
type Host interface {
	// Send queues one event for the browser.
	Send(ev protocol.Event)
	// History is the conversation so far, this turn's user input last. The
	// turn may keep the slice.
	History() []transport.Entry
	// Commit adds the turn's model and tool entries to the history and the
	// store.
	Commit(entries []transport.Entry)
	// Apply applies the intents a tool round returned.
	Apply(turn int, ins []intents.Intent)
	// ToolEvents shows the turn's tool calls to the browser.
	ToolEvents(turn int) orchestrator.Events
}

// Config is what every text turn of a session is run with.
type Config struct {
	System string // the system instruction: base prompt and tool guides
	Tools  []transport.ToolDecl
	// Provider names the model's provider in metrics.
	Provider transport.Provider
	// GenAIProvider and Model name the provider (gen_ai.provider.name) and
	// the model of the turn's chat spans.
	GenAIProvider     string
	Model             string
	MaxToolIterations int           // model↔tool rounds per turn (≥ 1)
	ModelTimeout      time.Duration // one model call
	// RestrictOutput makes the model answer through tools (finish or a
	// terminal tool): when it answers with text and no tool call, its text
	// stays in the turn's requests, RestrictionMessage (default
	// DefaultRestrictionMessage) follows it as a system-role entry
	// (transport.RoleSystem), and the model is asked again, at most
	// RestrictionMaxInjections times in a row: the count starts again after
	// every tool round, as seed 000's summarize node resets it (0: no limit
	// but the iteration limit). The base system prompt is never changed.
	// Neither the plain answer nor the reminder is committed: the user saw
	// neither.
	RestrictOutput           bool
	RestrictionMessage       string
	RestrictionMaxInjections int
}

// DefaultRestrictionMessage is the spec's restriction message.
const DefaultRestrictionMessage = "Do not produce a final answer directly. Before finishing, call a tool. " +
	"If no tool is needed, call the 'finish' tool."

// Deps are what a text turn talks to.
type Deps struct {
	Model   transport.TextModel
	Metrics *metrics.Metrics
	Log     *slog.Logger
	// Observe, when set, is shown every request of an admitted turn once
	// its stream has ended (for the session's context metrics): its
	// estimate walks the whole history, which the first text.delta does
	// not wait for.
	Observe func(req transport.TextRequest)
	// Admitted, when set, lets the turn's first model request be built
	// before the session knows whether the turn may run (its store round
	// trip runs alongside): it is called once, by the adapter before it
	// sends the request (transport.TextRequest.Admit), else before
	// anything the first request brought is acted on, and blocks until the
	// answer is known. false ends the turn at once with ReasonNotAdmitted:
	// nothing was shown, committed or run, and the request was not sent
	// (or, with an adapter that does not ask, is cancelled).
	Admitted func() bool
}

// ReasonNotAdmitted is what Run returns for a turn Deps.Admitted refused.
// It is never sent to the browser: the session refuses the turn its own way.
const ReasonNotAdmitted protocol.TurnEnd = "not_admitted"

// Run runs the turn ot to its end and returns its turn.done reason. note is
// a SET_PENDING_MESSAGE (or a confirmation outcome) to add to this turn's
// system instruction. ctx ends the turn early (turn.cancel, the connection
// going away). What the model produced is committed only when the turn
// reaches an answer or the iteration limit.
func Run(ctx context.Context, cfg Config, d Deps, h Host, ot *orchestrator.Turn, note string) protocol.TurnEnd {
	if cfg.RestrictionMessage == "" {
		cfg.RestrictionMessage = DefaultRestrictionMessage
	}
	l := loop{cfg: cfg, d: d, h: h, ot: ot, turn: ot.Number()}
	if d.Admitted != nil {
		// Asked once, from the adapter's HTTP transport or from here.
		l.verdict = sync.OnceValue(d.Admitted)
	}
	reason := l.run(ctx, note)
	l.d.Log.DebugContext(ctx, "tool loop complete", "turn", l.turn, "iterations", l.iterations, "reason", reason)
	return reason
}

type loop struct {
	cfg        Config
	d          Deps
	h          Host
	ot         *orchestrator.Turn
	turn       int
	iterations int         // model calls so far
	verdict    func() bool // Deps.Admitted, asked once (nil without one)

	sent []transport.Entry // this turn's entries as the model is sent them
	kept []transport.Entry // those of them that are committed
}

// add appends entries to the turn's requests and, when keep, to what is
// committed.
func (l *loop) add(keep bool, es ...transport.Entry) {
	l.sent = append(l.sent, es...)
	if keep {
		l.kept = append(l.kept, es...)
	}
}

func (l *loop) run(ctx context.Context, note string) protocol.TurnEnd {
	var said string // the model's text in this turn, as the deltas showed it
	restrict := l.cfg.RestrictOutput
	injections := 0
	system := transport.TurnNote(l.cfg.System, note)
	history := l.h.History()
	announced := map[string]bool{} // calls shown with tool.call before their arguments were complete
	for iter := 1; ; iter++ {
		l.iterations = iter
		req := transport.TextRequest{System: system, Tools: l.cfg.Tools,
			History: append(history[:len(history):len(history)], l.sent...)}

		text, calls, err := l.streamOnce(ctx, req, !restrict, announced)
		if errors.Is(err, errNotAdmitted) {
			return ReasonNotAdmitted
		}
		if l.d.Observe != nil {
			l.d.Observe(req)
		}
		if err != nil {
			return l.failed(ctx, err)
		}
		if len(calls) == 0 {
			max := l.cfg.RestrictionMaxInjections
			if restrict && (max == 0 || injections < max) && iter < l.cfg.MaxToolIterations {
				// The model tried to answer without a tool: its answer stays
				// in this turn's history, the restriction message follows
				// it, and the model is asked again.
				injections++
				if text != "" {
					l.add(false, transport.Entry{Role: transport.RoleModel, Text: text, Turn: l.turn})
				}
				l.add(false, transport.Entry{Role: transport.RoleSystem,
					Text: l.cfg.RestrictionMessage, Turn: l.turn})
				l.d.Log.InfoContext(ctx, "restricted output: model answered without a tool; instruction injected",
					"turn", l.turn, "injection", injections)
				continue
			}
			if restrict {
				l.d.Log.WarnContext(ctx, "restricted output: the model never used a tool; its text is the answer", "turn", l.turn)
				l.h.Send(protocol.TextDelta{Turn: l.turn, Text: text})
			}
			l.add(true, transport.Entry{Role: transport.RoleModel, Text: text, Turn: l.turn})
			said += text
			l.h.Commit(l.kept)
			traceAnswer(ctx, said)
			l.h.Send(protocol.TextDone{Turn: l.turn, Text: said})
			return protocol.ReasonEndTurn
		}
		if !restrict {
			said += text
		}
		rd := l.ot.Round(ctx, calls, earlyEvents{Events: l.h.ToolEvents(l.turn), h: l.h, turn: l.turn, announced: announced})
		if ctx.Err() != nil {
			return l.failed(ctx, ctx.Err())
		}
		l.add(true,
			transport.Entry{Role: transport.RoleModel, Text: text, Calls: rd.Calls, Turn: l.turn},
			transport.Entry{Role: transport.RoleTool, Results: rd.Responses, Turn: l.turn})
		l.h.Apply(l.turn, rd.Intents)
		// A tool step ends a run of plain answers: the next one may be
		// corrected again (seed 000 resets the counter after each tool step).
		injections = 0
		if rd.End != nil {
			// A terminal tool's output is the turn's final answer, exactly.
			l.add(true, transport.Entry{Role: transport.RoleModel, Text: rd.End.Text, Turn: l.turn})
			l.h.Commit(l.kept)
			traceAnswer(ctx, rd.End.Text)
			l.h.Send(protocol.TextDone{Turn: l.turn, Text: rd.End.Text})
			return rd.End.Reason
		}
		if iter >= l.cfg.MaxToolIterations {
			l.h.Commit(l.kept)
			l.d.Log.WarnContext(ctx, "turn stopped at the tool iteration limit", "turn", l.turn, "limit", l.cfg.MaxToolIterations)
			l.h.Send(protocol.NewError(protocol.CodeMaxIterations,
				fmt.Sprintf("max tool iterations (%d) exceeded", l.cfg.MaxToolIterations), false, l.turn))
			return protocol.ReasonMaxIterations
		}
	}
}

// streamOnce runs one model call, forwarding text deltas as they arrive
// when stream is true. A call whose name is known before its arguments are
// complete is shown at once (tool.call without args) and noted in
// announced; usage is counted.
func (l *loop) streamOnce(ctx context.Context, req transport.TextRequest, stream bool,
	announced map[string]bool) (string, []transport.FunctionCall, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.ModelTimeout)
	defer cancel()
	ctx, span := tracing.StartChat(ctx, l.cfg.GenAIProvider, l.cfg.Model)
	var usage transport.Usage
	start := clock.Wall.Now()
	first := true
	var text strings.Builder
	var calls []transport.FunctionCall
	if l.verdict != nil {
		// The adapter asks for the verdict before it sends the request's
		// contents: a refused turn (a user blocked on another node, whose
		// announcement has not arrived yet) reaches no model. Once known,
		// the answer is at hand for the turn's later requests.
		req.Admit = l.verdict
	}
	for chunk, err := range l.d.Model.Stream(ctx, req) {
		if errors.Is(err, transport.ErrNotAdmitted) {
			endChat(span, usage, "not_admitted") // no request was made: none to count
			return "", nil, errNotAdmitted
		}
		if !l.admitted() {
			l.d.Metrics.TextModelRequest(metrics.ModelCancelled)
			endChat(span, usage, string(metrics.ModelCancelled))
			return "", nil, errNotAdmitted
		}
		stages.Mark(stages.Admitted)
		if err != nil {
			l.d.Metrics.TextModelRequest(Outcome(err))
			endChat(span, usage, string(Outcome(err)))
			return text.String(), nil, err
		}
		if first {
			first = false
			ttfc := clock.Wall.Since(start)
			l.d.Metrics.TextModelFirstChunk(ttfc)
			traceFirstChunk(span, ttfc)
		}
		// Control characters are stripped before the text is shown or
		// kept; the turn goes on.
		if delta := protocol.StripControl(chunk.Text); delta != "" {
			text.WriteString(delta)
			if stream {
				l.h.Send(protocol.TextDelta{Turn: l.turn, Text: delta})
				stages.Mark(stages.DeltaQueued)
			}
		}
		for _, c := range chunk.Started {
			if c.ID != "" && !announced[c.ID] {
				announced[c.ID] = true
				l.h.Send(protocol.ToolCallStarted{Turn: l.turn, ID: c.ID, Name: c.Name})
			}
		}
		if u := chunk.Usage; u != nil {
			l.d.Metrics.AddModelTokens(l.cfg.Provider, l.ot.Channel(), u.InputTokens, u.OutputTokens)
			usage.InputTokens += u.InputTokens
			usage.OutputTokens += u.OutputTokens
		}
		calls = append(calls, chunk.Calls...)
	}
	if !l.admitted() { // a stream that ended without a chunk
		l.d.Metrics.TextModelRequest(metrics.ModelCancelled)
		endChat(span, usage, string(metrics.ModelCancelled))
		return "", nil, errNotAdmitted
	}
	l.d.Metrics.TextModelRequest(metrics.ModelOK)
	endChat(span, usage, "")
	return text.String(), calls, nil
}

// admitted asks Deps.Admitted, once per turn, whether the turn may run.
func (l *loop) admitted() bool { return l.verdict == nil || l.verdict() }

// earlyEvents shows a call the browser already saw announced (tool.call
// without args) with tool.args instead of a second tool.call; a call whose
// arguments could not be read gets no tool.args.
type earlyEvents struct {
	orchestrator.Events
	h         Host
	turn      int
	announced map[string]bool
}

func (e earlyEvents) CallReceived(c orchestrator.Call, redacted map[string]any) {
	switch {
	case !e.announced[c.ID]:
		e.Events.CallReceived(c, redacted)
	case c.ArgsError == "":
		e.h.Send(protocol.ToolArgs{Turn: e.turn, ID: c.ID, Args: redacted})
	}
}

// failed reports why a turn ended early; what the model produced in it is
// dropped (the user's message stays in the history).
func (l *loop) failed(ctx context.Context, err error) protocol.TurnEnd {
	var me *transport.ModelError
	turn := l.turn
	switch {
	case errors.Is(ctx.Err(), context.Canceled) && context.Cause(ctx) == ErrCancelled:
		l.h.Send(protocol.NewError(protocol.CodeTurnCancelled, "the turn was cancelled", true, turn))
		return protocol.ReasonInterrupted
	case ctx.Err() != nil:
		return protocol.ReasonInterrupted // the connection is gone
	case errors.Is(err, transport.ErrRefused), errors.Is(err, transport.ErrPromptBlocked):
		l.d.Log.WarnContext(ctx, "model refused to answer", "turn", turn, "err", err)
		l.h.Send(protocol.NewError(protocol.CodeModelRefused,
			"the model declined to answer this; try rephrasing", false, turn))
	case errors.Is(err, transport.ErrTruncated):
		l.d.Log.WarnContext(ctx, "model stream ended without a finish reason", "turn", turn)
		l.h.Send(protocol.NewError(protocol.CodeModelTruncated,
			"the model's answer was cut off; please try again", true, turn))
	case errors.Is(err, context.DeadlineExceeded):
		l.d.Log.WarnContext(ctx, "model call timed out", "turn", turn, "timeout", l.cfg.ModelTimeout)
		l.h.Send(protocol.NewError(protocol.CodeModelUnavailable, "the model did not answer in time", true, turn))
	case errors.As(err, &me) && me.Status == 0:
		l.d.Log.WarnContext(ctx, "model unreachable", "turn", turn, "err", err)
		l.h.Send(protocol.NewError(protocol.CodeModelUnavailable, "the model could not be reached", true, turn))
	case errors.As(err, &me):
		l.d.Log.WarnContext(ctx, "model error", "turn", turn, "status", me.Status, "code", me.Code, "err", me.Message)
		l.h.Send(protocol.NewError(protocol.CodeModelError,
			fmt.Sprintf("the model answered an error (%d %s)", me.Status, me.Code), me.Retryable, turn))
	default:
		l.d.Log.ErrorContext(ctx, "turn failed", "turn", turn, "err", err)
		l.h.Send(protocol.NewError(protocol.CodeInternal, "the turn failed unexpectedly", true, turn))
	}
	return protocol.ReasonError
}

// errNotAdmitted ends a stream whose turn Deps.Admitted refused.
var errNotAdmitted = errors.New("turn not admitted")

// ErrCancelled is the cause a session gives a turn's context when the user
// cancelled the turn (turn.cancel), as opposed to the connection ending.
var ErrCancelled = errors.New("turn cancelled by the user")

// Outcome is the model_requests_total outcome label of a model call's error.
func Outcome(err error) metrics.ModelOutcome {
	var me *transport.ModelError
	switch {
	case errors.Is(err, transport.ErrRefused), errors.Is(err, transport.ErrPromptBlocked):
		return metrics.ModelRefused
	case errors.Is(err, transport.ErrTruncated):
		return metrics.ModelTruncated
	case errors.Is(err, context.Canceled):
		return metrics.ModelCancelled
	case errors.Is(err, context.DeadlineExceeded):
		return metrics.ModelTimeout
	case errors.As(err, &me) && me.Status == 0:
		return metrics.ModelUnavailable
	case errors.As(err, &me) && me.Status >= 500:
		return metrics.ModelServerError
	case errors.As(err, &me) && me.Status == 429:
		return metrics.ModelRateLimited
	case errors.As(err, &me):
		return metrics.ModelClientError
	}
	return metrics.ModelError
}
