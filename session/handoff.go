package session

import (
	"context"
	"errors"
	"time"

	"github.com/turnstile-gw/turnstile/handoff"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/timeline"
	"github.com/turnstile-gw/turnstile/transport"
)

// A hand-off to a person (the model's request_human, the HAND_OFF intent)
// ends the model's part of the conversation: the browser hears `handoff`,
// the record keeps it (so that a resume on any node finds it), the
// timeline and the event stream get it, and the help desk is told (Desk).
// From then on what the user types is stored — history and timeline — and
// answered handoff.pending, never sent to the model, and voice is refused;
// in voice, the model's closing words play out and voice ends. An operator
// hands the session back (store.EndHandoff); the node holding it hears
// that on the owners channel (watcher.HandedBack) and tells the browser
// handoff.ended.

// HandoffDesk hears of hand-offs (*handoff.Desk is one).
type HandoffDesk interface {
	Notify(n handoff.Notice)
}

// handoffPendingText answers what the user types while a person has the
// conversation.
const handoffPendingText = "A person from the team will answer; your message was passed on to them."

// handedOff reports whether a person has the conversation.
func (s *session) handedOff() bool { return s.st.record().Handoff.Active() }

// handOff applies HAND_OFF in turn: once per hand-off (a second call while
// handed off changes nothing).
func (s *session) handOff(turn int, reason, summary string) {
	h := store.Handoff{Reason: reason, Summary: summary, At: s.m.now().UTC()}
	already := false
	s.st.update(func(rec *store.Record) {
		if already = rec.Handoff.Active(); !already {
			rec.Handoff = h
		}
	})
	if already {
		return
	}
	rec := s.st.record()
	ev := timeline.Event{Kind: timeline.KindEvent, Event: timeline.EventHandoff, Session: rec.ID, At: h.At, Turn: turn,
		Node: s.m.cfg.Node, Reason: reason, Summary: summary}
	entry := marshalEntry(s, ev)
	// The stream's record names the user too, by pseudonym as turns do.
	record := marshalEntry(s, struct {
		timeline.Event
		User string `json:"user"`
	}{ev, s.m.Pseudonym(s.id.User)})
	// Stored before the browser hears it (as keep does): told first, a
	// resume elsewhere before the write landed would fence it out, and
	// the conversation the user was told a person has would go on with
	// the model.
	s.pst.write(func(ctx context.Context, rec store.Record) error {
		return s.m.Store.HandOff(ctx, rec, h, entry, record)
	})
	s.sendHandoff(turn, h)
	s.log().Warn("conversation handed to a person", "turn", turn, "reason", reason)
	if s.m.Desk != nil {
		s.m.Desk.Notify(handoff.Notice{Session: rec.ID, User: s.id.User, Turn: turn, Reason: reason, Summary: summary,
			At: h.At, Node: s.m.cfg.Node})
	}
}

// sendHandoff tells the browser that a person has the conversation.
func (s *session) sendHandoff(turn int, h store.Handoff) {
	s.send(protocol.Handoff{Turn: turn, Reason: h.Reason, Summary: h.Summary,
		At: h.At.Format(time.RFC3339)})
}

// holdForPerson takes what the user typed while handed off: stored in the
// history and on the timeline, not sent to the model, answered
// handoff.pending.
func (s *session) holdForPerson(text string) {
	clipped, _ := timeline.Clip(text, timeline.MaxText)
	s.event(timeline.Event{Event: timeline.EventHandoffText, Text: clipped})
	s.hold(transport.Entry{Role: transport.RoleUser, Text: text, Turn: s.st.record().Turn, Kind: "handoff"})
}

// hold stores an entry of the user's side while handed off (keep) and
// then answers handoff.pending.
func (s *session) hold(entry transport.Entry) {
	s.keep(entry)
	s.send(protocol.HandoffPending{Message: handoffPendingText})
}

// keep adds an entry that is no model turn's (a greeting, a message held
// for a person) to the history and stores it with the timeline's events,
// waiting for the write: what the browser is told next (the greeting, the
// handoff.pending) comes after it is stored, so a resume elsewhere that
// it lets the user make finds it (written after, the write would be
// fenced out by the resume and the entry lost). A block read back
// applies as at a turn's end.
func (s *session) keep(entry transport.Entry) {
	entries := []transport.Entry{entry}
	s.pst.write(s.endTurn(entries, s.st.append(entries), nil))
}

// confirmNote is the user's answer to a confirmation as the model is told
// it, and as it is kept instead (held) when a person has the conversation
// by the time the model would be told.
type confirmNote struct {
	model, held string
	answer      orchestrator.Answered
}

// holdConfirmation takes a confirmation answer while handed off: no model
// turn starts (the conversation is with a person). The outcome is stored in
// the history as the confirmation entry the model reads once the
// conversation is handed back (the timeline has it already), and the
// browser is answered handoff.pending. An approval is withdrawn: it was
// given for the model's next turn, which never came, and must not let a
// call run unasked after the hand-back (on whichever node) — the model's
// repeated call asks the user again.
func (s *session) holdConfirmation(n confirmNote) {
	s.log().Info("confirmation answered while handed off: kept for the person, no model turn")
	if err := s.conversation().Withdraw(s.ctx, n.answer); err != nil && !errors.Is(err, orchestrator.ErrFenced) {
		s.log().Warn("could not withdraw an approval given while handed off; it lapses at its expiry",
			"tool", n.answer.Tool, "err", err)
	}
	s.hold(transport.Entry{Role: transport.RoleUser, Text: n.held, Turn: s.st.record().Turn, Kind: "confirmation"})
}

// handedBack: an operator gave the conversation back to the model (on any
// node); the browser hears it.
func (s *session) handedBack() {
	was := false
	s.st.update(func(rec *store.Record) { was, rec.Handoff = rec.Handoff.Active(), store.Handoff{} })
	if !was || !s.started.Load() {
		return // a connection not started yet reads the record as it is now
	}
	s.send(protocol.HandoffEnded{})
	s.log().Info("conversation handed back to the model by an operator")
}

// HandedBack: an operator handed the session back (store.EndHandoff).
func (w watcher) HandedBack(id string) {
	for _, s := range w.m.holders(id) {
		s.handedBack()
	}
}
