package session

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/transport"
)

// startTurn accepts a user message: it is in the history (and, unless
// Redis is down, in the store) before the model is called, then the turn
// runs in its own goroutine so that the reader can still take turn.cancel
// and ping.
func (c *conn) startTurn(text string) {
	c.m.mu.Lock()
	draining := c.m.draining
	c.m.mu.Unlock()
	if draining {
		c.send(protocol.NewError(protocol.CodeDraining,
			"the gateway is restarting; reconnect and send again", true, 0))
		return
	}
	c.turnMu.Lock()
	defer c.turnMu.Unlock()
	select {
	case <-c.closing:
		return // the connection is closing: take no new turn
	default:
	}
	if c.turnDone != nil {
		c.send(protocol.NewError(protocol.CodeTurnInProgress,
			"a turn is running; wait for turn.done or send turn.cancel", true, 0))
		return
	}
	c.mu.Lock()
	c.rec.Turn++
	c.turns++
	turn := c.rec.Turn
	user := transport.Entry{Role: transport.RoleUser, Text: text}
	c.history = trimHistory(append(c.history, user), c.m.cfg.HistoryMax)
	c.mu.Unlock()

	c.persist(user)
	c.send(protocol.NewTurnText(protocol.TypeTurnStart, turn, text))
	ctx, cancel := context.WithCancel(c.ctx)
	done := make(chan struct{})
	c.turnCancel, c.turnDone = cancel, done
	c.turnWG.Add(1)
	go func() {
		defer c.turnWG.Done()
		defer close(done)
		defer cancel()
		c.runTextTurn(ctx, turn)
	}()
}

// endTurn sends turn.done and clears the running turn in one step, so that
// a browser answering turn.done at once is never told a turn is running.
func (c *conn) endTurn(turn int, reason string) {
	c.turnMu.Lock()
	defer c.turnMu.Unlock()
	c.send(protocol.TurnDone{Type: protocol.TypeTurnDone, Turn: turn, Reason: reason})
	c.turnCancel, c.turnDone = nil, nil
}

func (c *conn) cancelTurn() {
	c.turnMu.Lock()
	cancel := c.turnCancel
	c.turnMu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// persist writes entries to the store. When Redis is unreachable the
// session goes on from memory and the next write rewrites everything.
func (c *conn) persist(entries ...transport.Entry) {
	c.mu.Lock()
	rec, dirty := c.rec, c.dirty
	var hist []transport.Entry
	if dirty {
		hist = append([]transport.Entry(nil), c.history...)
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), c.m.cfg.StoreTimeout)
	defer cancel()
	var err error
	if dirty {
		err = c.m.Store.Sync(ctx, rec, hist)
	} else {
		err = c.m.Store.Append(ctx, rec, entries...)
	}
	c.mu.Lock()
	c.dirty = err != nil
	c.mu.Unlock()
	switch {
	case err != nil:
		c.log.Warn("session store write failed; going on from memory and catching up later", "err", err)
	case dirty:
		c.log.Info("session store caught up after failed writes")
	}
}

// runTextTurn is the text agent loop: stream the model's answer, run the
// function calls it asks for through the orchestrator, send their results
// back, and repeat until a final answer or the iteration limit.
func (c *conn) runTextTurn(ctx context.Context, turn int) {
	start := time.Now()
	reason := c.textLoop(ctx, turn)
	c.endTurn(turn, reason)
	c.m.Metrics.Turns.WithLabelValues(protocol.ModeText, reason).Inc()
	c.m.Metrics.TurnDuration.WithLabelValues(protocol.ModeText).Observe(time.Since(start).Seconds())
	c.log.Info("turn done", "turn", turn, "reason", reason, "duration_ms", time.Since(start).Milliseconds())
}

func (c *conn) textLoop(ctx context.Context, turn int) string {
	var produced []transport.Entry // this turn's model and tool entries
	var said string                // all the model's text in this turn, as the deltas showed it
	for iter := 1; ; iter++ {
		c.mu.Lock()
		req := transport.TextRequest{System: c.m.system, Tools: c.m.decls,
			History: append(append([]transport.Entry(nil), c.history...), produced...)}
		c.mu.Unlock()

		text, calls, err := c.streamOnce(ctx, turn, req)
		if err != nil {
			return c.turnFailed(ctx, turn, err)
		}
		said += text
		if len(calls) == 0 {
			produced = append(produced, transport.Entry{Role: transport.RoleModel, Text: text})
			c.commit(produced)
			c.send(protocol.NewTurnText(protocol.TypeTextDone, turn, said))
			return protocol.ReasonEndTurn
		}
		for i := range calls {
			if calls[i].ID == "" {
				calls[i].ID, calls[i].Synthetic = fmt.Sprintf("c%d-%d-%d", turn, iter, i), true
			}
		}
		results := c.runCalls(ctx, turn, calls)
		if ctx.Err() != nil {
			return c.turnFailed(ctx, turn, ctx.Err())
		}
		produced = append(produced,
			transport.Entry{Role: transport.RoleModel, Text: text, Calls: calls},
			transport.Entry{Role: transport.RoleTool, Results: results})
		if iter >= c.m.cfg.MaxToolIterations {
			c.commit(produced)
			c.log.Warn("turn stopped at the tool iteration limit", "turn", turn, "limit", c.m.cfg.MaxToolIterations)
			return protocol.ReasonMaxIterations
		}
	}
}

// streamOnce runs one model call, forwarding text deltas as they arrive.
func (c *conn) streamOnce(ctx context.Context, turn int, req transport.TextRequest) (string, []transport.FunctionCall, error) {
	ctx, cancel := context.WithTimeout(ctx, c.m.cfg.ModelTimeout)
	defer cancel()
	start := time.Now()
	first := true
	var text string
	var calls []transport.FunctionCall
	for chunk, err := range c.m.Model.Stream(ctx, req) {
		if err != nil {
			c.m.Metrics.ModelRequests.WithLabelValues("text", modelOutcome(err)).Inc()
			return text, nil, err
		}
		if first {
			first = false
			c.m.Metrics.ModelFirstToken.WithLabelValues("text").Observe(time.Since(start).Seconds())
		}
		if chunk.Text != "" {
			text += chunk.Text
			c.send(protocol.NewTurnText(protocol.TypeTextDelta, turn, chunk.Text))
		}
		calls = append(calls, chunk.Calls...)
	}
	c.m.Metrics.ModelRequests.WithLabelValues("text", "ok").Inc()
	return text, calls, nil
}

// runCalls executes one model message's calls concurrently and returns
// their results in the calls' order.
func (c *conn) runCalls(ctx context.Context, turn int, calls []transport.FunctionCall) []transport.FunctionResult {
	c.mu.Lock()
	base := orchestrator.Call{SessionID: c.rec.ID, UserID: c.user, Mode: c.rec.Mode, Turn: turn}
	c.mu.Unlock()
	results := make([]transport.FunctionResult, len(calls))
	var wg sync.WaitGroup
	for i, fc := range calls {
		c.send(protocol.ToolCall{Type: protocol.TypeToolCall, Turn: turn, ID: fc.ID, Name: fc.Name,
			Args: c.m.Orchestrator.RedactedArgs(fc.Name, fc.Args)})
		call := base
		call.ID, call.Name, call.Args = fc.ID, fc.Name, fc.Args
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := c.m.Orchestrator.Execute(ctx, call)
			ev := protocol.ToolResult{Type: protocol.TypeToolResult, Turn: turn, ID: fc.ID, Name: fc.Name,
				OK: out.Envelope.OK, DurationMs: out.Duration.Milliseconds()}
			if e := out.Envelope.Error; e != nil {
				ev.Error = &protocol.ToolError{Type: string(e.Type), Message: e.Message}
			}
			c.send(ev)
			results[i] = transport.FunctionResult{ID: fc.ID, Name: fc.Name, Response: out.Response}
		}()
	}
	wg.Wait()
	return results
}

// commit adds a finished turn's entries to the history and the store.
func (c *conn) commit(entries []transport.Entry) {
	c.mu.Lock()
	c.history = trimHistory(append(c.history, entries...), c.m.cfg.HistoryMax)
	c.mu.Unlock()
	c.persist(entries...)
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
