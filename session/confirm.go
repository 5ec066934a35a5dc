package session

import (
	"errors"

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
	a, err := c.conv.Answer(c.ctx, token, approve)
	if errors.Is(err, orchestrator.ErrFenced) {
		return // the conversation ended this connection (4005), as on any fenced write
	}
	if err == nil || errors.Is(err, orchestrator.ErrConfirmUnknown) || errors.Is(err, orchestrator.ErrConfirmExpired) {
		c.st.dropConfirmation(token) // answered, or never to be answered
	}
	switch {
	case errors.Is(err, orchestrator.ErrConfirmUnknown):
		c.send(protocol.NewError(protocol.CodeConfirmUnknown,
			"no such confirmation: it was already answered, or belongs to another session", false, 0))
		return
	case errors.Is(err, orchestrator.ErrConfirmExpired):
		c.traceConfirmation(a.Confirmation, string(a.Outcome))
		c.send(protocol.NewError(protocol.CodeConfirmExpired,
			"this confirmation expired; the call was not made", false, 0))
		c.send(protocol.ConfirmDone{Token: token, Tool: a.Tool, Outcome: string(a.Outcome)})
		c.event(timeline.Event{Event: timeline.EventConfirmation, Tool: a.Tool, Outcome: string(a.Outcome)})
		return
	case err != nil:
		if errors.Is(err, store.ErrSessionGone) {
			c.pst.restoreSoon() // Redis lost the record: write the session back, the answer can come again
		}
		c.log().Warn("confirmation store unavailable", "err", err)
		c.send(protocol.NewError(protocol.CodeStoreUnavailable,
			"your answer could not be recorded; try again shortly", true, 0))
		return
	}
	c.traceConfirmation(a.Confirmation, string(a.Outcome))
	c.event(timeline.Event{Event: timeline.EventConfirmation, Tool: a.Tool, Outcome: string(a.Outcome)})
	c.send(protocol.ConfirmDone{Token: token, Tool: a.Tool, Outcome: string(a.Outcome)})
	// The model that asked learns it: the Live model in voice (never the
	// text model), else a text turn of its own, once any running turn ends;
	// unless a person has the conversation by then (holdConfirmation).
	c.act.confirmed(confirmNote{model: a.Note, held: a.Held})
}

// pendingConfirmations are the session's confirmations still waiting for
// the user, which a resume shows again.
func (c *conn) pendingConfirmations() []protocol.ConfirmRequest {
	pending, err := c.conv.Pending(c.ctx)
	if err != nil {
		c.log().Warn("could not read pending confirmations", "err", err)
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
	c.m.Tracing.Confirmation(c.ctx, tracing.Turn{Session: c.st.record().ID, User: c.id.User, N: conf.Turn,
		Mode: string(c.st.mode()), Link: c.traceLink}, conf.Tool, outcome)
}
