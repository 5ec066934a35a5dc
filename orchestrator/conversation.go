package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/turnstile-gw/turnstile/loopdetect"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/protocol"
)

// Conversation is the policy of one session across its turns, text and
// voice alike: its loop history (the last Config.LoopTurns turns), its
// confirmations — asked in a turn (admit.go) and answered here — its
// fencing (the epoch every ledger and confirmation write carries, and who
// is told when a write is refused), and its call ledger. Each turn comes
// from Turn and is recorded once by Turn.End. The session holds one
// Conversation and never reads the orchestrator's settings.
type Conversation struct {
	o     *Orchestrator
	s     Session
	loops *loopdetect.Detector
}

// Open starts the policy of session s (its Mode is ignored: each turn
// names its own). It makes no store call.
func (o *Orchestrator) Open(s Session) *Conversation {
	return &Conversation{o: o, s: s, loops: loopdetect.New(o.cfg.LoopTurns)}
}

// Session is who the conversation belongs to.
func (cv *Conversation) Session() Session { return cv.s }

// Turn starts turn n, in mode, with the conversation's loop history.
func (cv *Conversation) Turn(n int, mode protocol.Mode) *Turn {
	s := cv.s
	s.Mode = mode
	return cv.o.NewTurn(s, n, cv.loops)
}

// LoopTurns is how many turns the loop history holds now.
func (cv *Conversation) LoopTurns() int { return cv.loops.Turns() }

// LoopState is the loop history's counts, oldest turn first; it never
// holds arguments.
func (cv *Conversation) LoopState() []loopdetect.TurnState { return cv.loops.Snapshot() }

// Answered is the user's answer to a confirmation, as Answer took it.
type Answered struct {
	// Confirmation is the call the answer was about.
	Confirmation
	// Outcome is ConfirmApproved or ConfirmDenied; ConfirmExpired with
	// ErrConfirmExpired.
	Outcome metrics.ConfirmationOutcome
	// Note is what the model that asked is told, so that it can call the
	// tool again (approved) or tell the user it was not done (denied); ""
	// for an answer that came too late.
	Note string
	// Held is what the model reads instead, at its next turn, when a
	// person has the conversation by the time it would be told (a
	// hand-off): the call was not made.
	Held string
}

// Answer takes the user's answer to confirmation token, in one store
// round trip (bounded by Config.StoreTimeout). The answer is bound to the
// session and its user, used once, and an approval is kept for the same
// tool and arguments for Config.ConfirmTTL. It is counted
// (turnstile_confirmations_total) and logged. Errors:
// ErrConfirmUnknown (no such confirmation of this session, or already
// answered), ErrConfirmExpired (too late; Answered names the call),
// ErrFenced (another connection owns the session: Session.TakenOver has
// been called), or the store's own (it could not be reached; the answer may
// come again).
func (cv *Conversation) Answer(ctx context.Context, token string, approve bool) (Answered, error) {
	if cv.o.Confirms == nil {
		cv.o.Metrics.Confirmation(metrics.ConfirmInvalid)
		return Answered{}, ErrConfirmUnknown
	}
	sctx, cancel := context.WithTimeout(ctx, cv.o.cfg.StoreTimeout)
	defer cancel()
	conf, err := cv.o.Confirms.Resolve(sctx, cv.s.ID, cv.s.Epoch, cv.s.UserID, token, approve, cv.o.cfg.ConfirmTTL)
	a := Answered{Confirmation: conf}
	switch {
	case errors.Is(err, ErrFenced):
		// Another connection owns the session now: the answer is not
		// taken here, and this connection ends as on any fenced write.
		if cv.s.TakenOver != nil {
			cv.s.TakenOver()
		}
		return a, err
	case errors.Is(err, ErrConfirmUnknown):
		cv.o.Metrics.Confirmation(metrics.ConfirmInvalid)
		return a, err
	case errors.Is(err, ErrConfirmExpired):
		a.Outcome = metrics.ConfirmExpired
		cv.o.Metrics.Confirmation(a.Outcome)
		return a, err
	case err != nil:
		return a, fmt.Errorf("resolve confirmation: %w", err)
	}
	if approve {
		a.Outcome = metrics.ConfirmApproved
		a.Note = fmt.Sprintf("[The user approved your pending call to %s. Call %s again now with exactly the same "+
			"arguments.]", conf.Tool, conf.Tool)
		a.Held = fmt.Sprintf("[While a person had the conversation, the user approved your pending call to %s. It "+
			"was not made, and the approval has lapsed; if it is still wanted, call %s again with the same arguments "+
			"and the user will be asked again.]", conf.Tool, conf.Tool)
	} else {
		a.Outcome = metrics.ConfirmDenied
		a.Note = fmt.Sprintf("[The user declined your pending call to %s. Do not call it again with those arguments; "+
			"tell the user it was not done.]", conf.Tool)
		a.Held = fmt.Sprintf("[While a person had the conversation, the user declined your pending call to %s. It was "+
			"not made; do not call it again with those arguments.]", conf.Tool)
	}
	cv.o.Metrics.Confirmation(a.Outcome)
	sessionLog(cv.o, cv.s).Info("confirmation answered", "tool", conf.Tool, "outcome", a.Outcome)
	return a, nil
}

// Withdraw takes back the approval a's answer stored, unused (one store
// round trip, bounded by Config.StoreTimeout): the model was never told of
// it (a person had the conversation by then), so its repeated call, once
// the conversation is handed back, asks the user again instead of running
// on an approval given for a turn that never came. Nothing for a denial.
func (cv *Conversation) Withdraw(ctx context.Context, a Answered) error {
	if cv.o.Confirms == nil || a.Outcome != metrics.ConfirmApproved {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, cv.o.cfg.StoreTimeout)
	defer cancel()
	err := cv.o.Confirms.Revoke(sctx, cv.s.ID, cv.s.Epoch, cv.s.UserID, a.Tool, a.ArgsDigest)
	if errors.Is(err, ErrFenced) && cv.s.TakenOver != nil {
		cv.s.TakenOver()
	}
	return err
}

// Pending lists the session's confirmations still waiting for an answer
// (one store round trip, bounded by Config.StoreTimeout); none without a
// confirmation store.
func (cv *Conversation) Pending(ctx context.Context) ([]Confirmation, error) {
	if cv.o.Confirms == nil {
		return nil, nil
	}
	sctx, cancel := context.WithTimeout(ctx, cv.o.cfg.StoreTimeout)
	defer cancel()
	return cv.o.Confirms.Pending(sctx, cv.s.ID)
}

// sessionLog is s's logger (Session.Log), or o's with the session's ID.
func sessionLog(o *Orchestrator, s Session) *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return o.Log.With("session", s.ID)
}
