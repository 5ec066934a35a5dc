package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/transport"
)

// runTextTurn is the text agent loop: stream the model's answer, run the
// function calls it asks for through the orchestrator, send their results
// back, and repeat until a final answer, a terminal tool, or the iteration
// limit.
func (c *conn) runTextTurn(ctx context.Context, turn int, note string) {
	start := time.Now()
	ot := c.m.Orchestrator.NewTurn(orchestrator.Session{ID: c.rec.ID, UserID: c.user, Mode: protocol.ModeText}, turn, c.loops)
	reason := c.textLoop(ctx, turn, note, ot)
	ot.CancelAll() // nothing of this turn may run on
	c.m.Metrics.ToolCallsPerTurn.WithLabelValues(protocol.ModeText).Observe(float64(ot.Calls()))
	c.m.Metrics.Turns.WithLabelValues(protocol.ModeText, reason).Inc()
	c.m.Metrics.TurnDuration.WithLabelValues(protocol.ModeText).Observe(time.Since(start).Seconds())
	c.endTurn(turn, reason)
	c.log.Info("turn done", "turn", turn, "reason", reason, "tool_calls", ot.Calls(),
		"duration_ms", time.Since(start).Milliseconds())
	c.mu.Lock()
	toVoice := c.voiceAfterTurn
	c.voiceAfterTurn = false
	c.mu.Unlock()
	if toVoice && ctx.Err() == nil {
		c.startVoice("start_voice_session", "")
	}
}

func (c *conn) textLoop(ctx context.Context, turn int, note string, ot *orchestrator.Turn) string {
	var produced []transport.Entry // this turn's model and tool entries
	var said string                // the model's text in this turn, as the deltas showed it
	restrict := c.m.cfg.RestrictOutput
	injections := 0
	inject := ""
	for iter := 1; ; iter++ {
		system := c.m.system
		if note != "" {
			system += "\n\n# Note for this turn\n" + note
		}
		if inject != "" {
			system += "\n\n" + inject
		}
		c.mu.Lock()
		req := transport.TextRequest{System: system, Tools: c.m.decls,
			History: append(append([]transport.Entry(nil), c.history...), produced...)}
		c.mu.Unlock()

		text, calls, err := c.streamOnce(ctx, turn, req, !restrict)
		if err != nil {
			return c.turnFailed(ctx, turn, err)
		}
		if len(calls) == 0 {
			max := c.m.cfg.RestrictionMaxInjections
			if restrict && (max == 0 || injections < max) && iter < c.m.cfg.MaxToolIterations {
				// The model tried to answer without a tool: its text is
				// dropped, and it is asked again with the restriction
				// message added to this turn's system instruction.
				injections++
				inject = c.m.cfg.RestrictionMessage
				c.log.Info("restricted output: model answered without a tool; instruction injected",
					"turn", turn, "injection", injections)
				continue
			}
			if restrict {
				c.log.Warn("restricted output: the model never used a tool; its text is the answer", "turn", turn)
				c.send(protocol.NewTurnText(protocol.TypeTextDelta, turn, text))
			}
			produced = append(produced, transport.Entry{Role: transport.RoleModel, Text: text, Turn: turn})
			said += text
			c.commit(produced)
			c.send(protocol.NewTurnText(protocol.TypeTextDone, turn, said))
			return protocol.ReasonEndTurn
		}
		if !restrict {
			said += text
		}
		for i := range calls {
			if calls[i].ID == "" {
				calls[i].ID, calls[i].Synthetic = fmt.Sprintf("c%d-%d-%d", turn, iter, i), true
			}
		}
		results := c.runCalls(ctx, turn, ot, calls)
		if ctx.Err() != nil {
			return c.turnFailed(ctx, turn, ctx.Err())
		}
		produced = append(produced,
			transport.Entry{Role: transport.RoleModel, Text: text, Calls: calls, Turn: turn},
			transport.Entry{Role: transport.RoleTool, Results: results, Turn: turn})
		ins := ot.Intents()
		c.applyIntents(turn, ins, nil)
		if end, ok := ot.End(); ok && !modeTransition(ins) {
			// A terminal tool's output is the turn's final answer, exactly.
			produced = append(produced, transport.Entry{Role: transport.RoleModel, Text: end.Text, Turn: turn})
			c.commit(produced)
			c.send(protocol.NewTurnText(protocol.TypeTextDone, turn, end.Text))
			return end.Reason
		}
		if iter >= c.m.cfg.MaxToolIterations {
			c.commit(produced)
			c.log.Warn("turn stopped at the tool iteration limit", "turn", turn, "limit", c.m.cfg.MaxToolIterations)
			return protocol.ReasonMaxIterations
		}
	}
}

// modeTransition reports whether intents switch the session's mode, which
// wins over a terminal result in the same turn.
func modeTransition(ins []intents.Intent) bool {
	for _, in := range ins {
		if in.Type == intents.StartVoiceSession || in.Type == intents.EndVoiceSession {
			return true
		}
	}
	return false
}

// streamOnce runs one model call, forwarding text deltas as they arrive
// when stream is true.
func (c *conn) streamOnce(ctx context.Context, turn int, req transport.TextRequest, stream bool) (string, []transport.FunctionCall, error) {
	ctx, cancel := context.WithTimeout(ctx, c.m.cfg.ModelTimeout)
	defer cancel()
	start := time.Now()
	first := true
	var text strings.Builder
	var calls []transport.FunctionCall
	for chunk, err := range c.m.Model.Stream(ctx, req) {
		if err != nil {
			c.m.Metrics.ModelRequests.WithLabelValues("text", modelOutcome(err)).Inc()
			return text.String(), nil, err
		}
		if first {
			first = false
			c.m.Metrics.ModelFirstToken.WithLabelValues("text").Observe(time.Since(start).Seconds())
		}
		if chunk.Text != "" {
			text.WriteString(chunk.Text)
			if stream {
				c.send(protocol.NewTurnText(protocol.TypeTextDelta, turn, chunk.Text))
			}
		}
		calls = append(calls, chunk.Calls...)
	}
	c.m.Metrics.ModelRequests.WithLabelValues("text", "ok").Inc()
	return text.String(), calls, nil
}

// runCalls runs one model message's calls through the orchestrator and
// returns the results to send back, in the calls' order. Every call of a
// text model message must be answered, so each gets a result.
func (c *conn) runCalls(ctx context.Context, turn int, ot *orchestrator.Turn, calls []transport.FunctionCall) []transport.FunctionResult {
	oc := make([]orchestrator.Call, len(calls))
	for i, fc := range calls {
		oc[i] = orchestrator.Call{ID: fc.ID, Name: fc.Name, Args: fc.Args}
	}
	res := ot.Handle(ctx, oc, turnEvents{c: c, turn: turn})
	out := make([]transport.FunctionResult, 0, len(res))
	for _, r := range res {
		if !r.Send || !ot.Answer(r.Call.ID) {
			continue
		}
		out = append(out, transport.FunctionResult{ID: r.Call.ID, Name: r.Call.Name, Response: r.Outcome.Response})
	}
	return out
}

// turnFailed reports why a turn ended early; what the model produced in it
// is dropped (the user's message stays in the history).
func (c *conn) turnFailed(ctx context.Context, turn int, err error) string {
	var me *transport.ModelError
	switch {
	case ctx.Err() != nil && c.ctx.Err() == nil:
		c.send(protocol.NewError(protocol.CodeTurnCancelled, "the turn was cancelled", true, turn))
		return protocol.ReasonInterrupted
	case ctx.Err() != nil:
		return protocol.ReasonInterrupted // the connection is gone
	case errors.Is(err, transport.ErrTruncated):
		c.log.Warn("model stream ended without a finish reason", "turn", turn)
		c.send(protocol.NewError(protocol.CodeModelTruncated,
			"the model's answer was cut off; please try again", true, turn))
	case errors.Is(err, context.DeadlineExceeded):
		c.log.Warn("model call timed out", "turn", turn, "timeout", c.m.cfg.ModelTimeout)
		c.send(protocol.NewError(protocol.CodeModelUnavailable, "the model did not answer in time", true, turn))
	case errors.As(err, &me) && me.Status == 0:
		c.log.Warn("model unreachable", "turn", turn, "err", err)
		c.send(protocol.NewError(protocol.CodeModelUnavailable, "the model could not be reached", true, turn))
	case errors.As(err, &me):
		c.log.Warn("model error", "turn", turn, "status", me.Status, "code", me.Code, "err", me.Message)
		c.send(protocol.NewError(protocol.CodeModelError,
			fmt.Sprintf("the model answered an error (%d %s)", me.Status, me.Code), me.Retryable, turn))
	default:
		c.log.Error("turn failed", "turn", turn, "err", err)
		c.send(protocol.NewError(protocol.CodeInternal, "the turn failed unexpectedly", true, turn))
	}
	return protocol.ReasonError
}

func modelOutcome(err error) string {
	var me *transport.ModelError
	switch {
	case errors.Is(err, transport.ErrTruncated):
		return "truncated"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &me) && me.Status == 0:
		return "unavailable"
	case errors.As(err, &me) && me.Status >= 500:
		return "server_error"
	case errors.As(err, &me) && me.Status == 429:
		return "rate_limited"
	case errors.As(err, &me):
		return "client_error"
	}
	return "error"
}
