package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/timeline"
	"github.com/turnstile-gw/turnstile/tracing"
)

// answerConfirm takes the user's answer to a confirm.request. The answer is
// bound to this session and user (the store checks both), used once, and
// the model learns it in a turn of its own (or at the next turn when one is
// running) so that it can call the tool again.
func (c *conn) answerConfirm(token string, approve bool) {
	ctx, cancel := context.WithTimeout(c.ctx, c.m.cfg.StoreTimeout)
	defer cancel()
	rec := c.st.record()
	conf, err := c.m.Store.Resolve(ctx, rec.ID, rec.Epoch, c.user, token, approve, c.m.Orchestrator.Config().ConfirmTTL)
	if errors.Is(err, store.ErrFenced) {
		// Another connection owns the session now: the answer is not
		// taken here, and this connection ends (4005) as on any fenced
		// write.
		c.takenOver()
		return
	}
	if err == nil || errors.Is(err, orchestrator.ErrConfirmUnknown) || errors.Is(err, orchestrator.ErrConfirmExpired) {
		c.st.dropConfirmation(token) // answered, or never to be answered
	}
	switch {
	case errors.Is(err, orchestrator.ErrConfirmUnknown):
		c.m.Metrics.Confirmation(metrics.ConfirmInvalid)
		c.send(protocol.NewError(protocol.CodeConfirmUnknown,
			"no such confirmation: it was already answered, or belongs to another session", false, 0))
		return
	case errors.Is(err, orchestrator.ErrConfirmExpired):
		c.m.Metrics.Confirmation(metrics.ConfirmExpired)
		c.traceConfirmation(conf, string(metrics.ConfirmExpired))
		c.send(protocol.NewError(protocol.CodeConfirmExpired,
			"this confirmation expired; the call was not made", false, 0))
		c.send(protocol.ConfirmDone{Type: protocol.TypeConfirmDone, Token: token, Tool: conf.Tool, Outcome: string(metrics.ConfirmExpired)})
		c.event(timeline.Event{Event: timeline.EventConfirmation, Tool: conf.Tool, Outcome: string(metrics.ConfirmExpired)})
		return
	case err != nil:
		if errors.Is(err, store.ErrSessionGone) {
			c.pst.restoreSoon() // Redis lost the record: write the session back, the answer can come again
		}
		c.log.Warn("confirmation store unavailable", "err", err)
		c.send(protocol.NewError(protocol.CodeStoreUnavailable,
			"your answer could not be recorded; try again shortly", true, 0))
		return
	}
	outcome, note := metrics.ConfirmDenied, confirmNote{
		model: fmt.Sprintf("[The user declined your pending call to %s. Do not call it again "+
			"with those arguments; tell the user it was not done.]", conf.Tool),
		held: fmt.Sprintf("[While a person had the conversation, the user declined your pending call to %s. "+
			"It was not made; do not call it again with those arguments.]", conf.Tool)}
	if approve {
		outcome, note = metrics.ConfirmApproved, confirmNote{
			model: fmt.Sprintf("[The user approved your pending call to %s. Call %s again now "+
				"with exactly the same arguments.]", conf.Tool, conf.Tool),
			held: fmt.Sprintf("[While a person had the conversation, the user approved your pending call to %s. "+
				"It was not made; if it is still wanted, call %s again with the same arguments.]", conf.Tool, conf.Tool)}
	}
	c.m.Metrics.Confirmation(outcome)
	c.traceConfirmation(conf, string(outcome))
	c.log.Info("confirmation answered", "tool", conf.Tool, "outcome", outcome)
	c.event(timeline.Event{Event: timeline.EventConfirmation, Tool: conf.Tool, Outcome: string(outcome)})
	c.send(protocol.ConfirmDone{Type: protocol.TypeConfirmDone, Token: token, Tool: conf.Tool, Outcome: string(outcome)})
	// The model that asked learns it: the Live model in voice (never the
	// text model), else a text turn of its own, once any running turn ends;
	// unless a person has the conversation by then (holdConfirmation).
	c.act.confirmed(note)
}

func (c *conn) pendingConfirmations() []protocol.ConfirmRequest {
	ctx, cancel := context.WithTimeout(c.ctx, c.m.cfg.StoreTimeout)
	defer cancel()
	pending, err := c.m.Store.Pending(ctx, c.st.record().ID)
	if err != nil {
		c.log.Warn("could not read pending confirmations", "err", err)
		return nil
	}
	out := make([]protocol.ConfirmRequest, 0, len(pending))
	for _, p := range pending {
		c.st.addConfirmation(p)
		out = append(out, confirmRequest(p))
	}
	return out
}

// traceConfirmation records the user's answer to a confirmation in the
// traces (tracing.Provider.Confirmation).
func (c *conn) traceConfirmation(conf orchestrator.Confirmation, outcome string) {
	c.m.Tracing.Confirmation(c.ctx, tracing.Turn{Session: c.st.record().ID, User: c.user, N: conf.Turn,
		Mode: c.st.mode(), Link: c.traceLink}, conf.Tool, outcome)
}
