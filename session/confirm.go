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
func (s *session) answerConfirm(token string, approve bool) {
	a, err := s.conversation().Answer(s.ctx, token, approve)
	if errors.Is(err, orchestrator.ErrFenced) {
		return // the conversation ended this connection (4005), as on any fenced write
	}
	if err == nil || errors.Is(err, orchestrator.ErrConfirmUnknown) || errors.Is(err, orchestrator.ErrConfirmExpired) {
		s.st.dropConfirmation(token) // answered, or never to be answered
	}
	switch {
	case errors.Is(err, orchestrator.ErrConfirmUnknown):
		s.send(protocol.NewError(protocol.CodeConfirmUnknown,
			"no such confirmation: it was already answered, or belongs to another session", false, 0))
		return
	case errors.Is(err, orchestrator.ErrConfirmExpired):
		s.traceConfirmation(a.Confirmation, string(a.Outcome))
		s.send(protocol.NewError(protocol.CodeConfirmExpired,
			"this confirmation expired; the call was not made", false, 0))
		s.send(protocol.ConfirmDone{Token: token, Tool: a.Tool, Outcome: string(a.Outcome)})
		s.event(timeline.Event{Event: timeline.EventConfirmation, Tool: a.Tool, Outcome: string(a.Outcome)})
		return
	case err != nil:
		if errors.Is(err, store.ErrSessionGone) {
			s.pst.restoreSoon() // Redis lost the record: write the session back, the answer can come again
		}
		s.log().Warn("confirmation store unavailable", "err", err)
		s.send(protocol.NewError(protocol.CodeStoreUnavailable,
			"your answer could not be recorded; try again shortly", true, 0))
		return
	}
	s.traceConfirmation(a.Confirmation, string(a.Outcome))
	s.event(timeline.Event{Event: timeline.EventConfirmation, Tool: a.Tool, Outcome: string(a.Outcome)})
	s.send(protocol.ConfirmDone{Token: token, Tool: a.Tool, Outcome: string(a.Outcome)})
	// The model that asked learns it: the Live model in voice (never the
	// text model), else a text turn of its own, once any running turn ends;
	// unless a person has the conversation by then (holdConfirmation).
	s.act.confirmed(confirmNote{model: a.Note, held: a.Held, answer: a})
}

// pendingConfirmations are the session's confirmations still waiting for
// the user, which a resume shows again.
func (s *session) pendingConfirmations() []protocol.ConfirmRequest {
	pending, err := s.conversation().Pending(s.ctx)
	if err != nil {
		s.log().Warn("could not read pending confirmations", "err", err)
		return nil
	}
	out := make([]protocol.ConfirmRequest, 0, len(pending))
	for _, p := range pending {
		s.st.addConfirmation(p)
		out = append(out, confirmRequest(p))
	}
	return out
}

// traceConfirmation records the user's answer to a confirmation in the
// traces (tracing.Provider.Confirmation).
func (s *session) traceConfirmation(conf orchestrator.Confirmation, outcome string) {
	s.m.Tracing.Confirmation(s.ctx, tracing.Turn{Session: s.st.record().ID, User: s.id.User, N: conf.Turn,
		Mode: string(s.st.mode()), Link: s.link()}, conf.Tool, outcome)
}
