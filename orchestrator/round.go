package orchestrator

import (
	"context"
	"errors"
	"log/slog"

	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/transport"
)

// TerminalNote tells an audio model that a terminal tool's text has been
// shown to the user as the final answer. It goes with that call's response
// in voice only, and never when a mode change wins over the terminal result.
const TerminalNote = "This text was shown to the user as the final answer. Do not repeat or add to it; end your turn."

// Round is what one model message's tool calls came to. The text loop and
// the voice loop both act on it and on nothing else, so the rules below
// live here once.
type Round struct {
	// Calls are the model's calls with their IDs: a call the provider sent
	// without one got a synthetic ID, a random UUID (transport.NewCallID).
	Calls []transport.FunctionCall
	// Results are the pipeline's results, in the calls' order.
	Results []Result
	// Responses are the answers to send upstream now, in the calls' order:
	// every call is answered exactly once, except duplicates and calls
	// cancelled meanwhile, which never are.
	Responses []transport.FunctionResult
	// Intents are the intents this round's tools returned, to apply now.
	Intents []intents.Intent
	// End is set when a terminal tool or finish ended the turn. A mode
	// change requested in the same turn wins: then End is nil and the
	// terminal output is an ordinary result.
	End *End
	// ModeChange is true when this turn's tools asked to switch modes.
	ModeChange bool
}

// Round runs one model message's calls through the pipeline and applies
// the rules both loops share: synthetic IDs for calls that came without
// one, which results are sent upstream (each call answered once, recorded
// as answered in the durable ledger in one round trip), terminal versus
// mode change, and the terminal note for audio models. ctx bounds the
// calls; the caller sends Responses upstream.
func (t *Turn) Round(ctx context.Context, calls []transport.FunctionCall, ev Events) Round {
	t.mu.Lock()
	t.rounds++
	round := t.rounds
	before := len(t.intents)
	t.mu.Unlock()

	if t.o.Log.Enabled(ctx, slog.LevelDebug) {
		t.o.Log.DebugContext(ctx, "executing tool calls", "session", t.s.ID, "turn", t.n, "iteration", round, "count", len(calls))
	}
	r := Round{Calls: make([]transport.FunctionCall, len(calls))}
	oc := make([]Call, len(calls))
	for i, fc := range calls {
		if fc.ID == "" {
			fc.ID, fc.Synthetic = transport.NewCallID(), true
		}
		r.Calls[i] = fc
		oc[i] = Call{ID: fc.ID, Name: fc.Name, Args: fc.Args, ArgsError: fc.ArgsError}
	}
	r.Results = t.Handle(ctx, oc, ev)

	t.mu.Lock()
	r.Intents = append([]intents.Intent(nil), t.intents[before:]...)
	r.ModeChange = modeTransition(t.intents)
	end := t.end
	t.mu.Unlock()
	if end != nil && !r.ModeChange {
		e := *end
		r.End = &e
	}

	var answered []CallRecord
	for _, res := range r.Results {
		if !res.Send {
			continue // a duplicate: never answered
		}
		rec, ok := t.ledger.answer(res.Call.ID)
		if !ok {
			continue // cancelled meanwhile: never answered
		}
		resp := res.Outcome.Response
		if r.End != nil && res.Call.ID == r.End.CallID && t.s.Mode == protocol.ModeVoice {
			resp = withInstruction(resp, TerminalNote)
		}
		r.Responses = append(r.Responses, transport.FunctionResult{ID: res.Call.ID, Name: res.Call.Name, Response: resp})
		if !res.Outcome.Replayed {
			rec.Response = resp
			answered = append(answered, rec)
		}
	}
	t.recordAnswers(ctx, answered)
	return r
}

// recordAnswers tells the durable ledger which calls were answered, and
// with what, in one round trip (none once the turn is fenced).
func (t *Turn) recordAnswers(ctx context.Context, recs []CallRecord) {
	if t.o.Ledger == nil || len(recs) == 0 || t.fenced.Load() {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.o.cfg.StoreTimeout)
	defer cancel()
	err := t.o.Ledger.Answer(sctx, t.s.ID, t.s.Epoch, recs)
	switch {
	case errors.Is(err, ErrFenced):
		t.takenOver("answer")
	case err != nil:
		t.o.Log.WarnContext(ctx, "call ledger write failed", "session", t.s.ID, "turn", t.n, "calls", len(recs), "err", err)
	}
}

func withInstruction(resp map[string]any, note string) map[string]any {
	out := make(map[string]any, len(resp)+1)
	for k, v := range resp {
		out[k] = v
	}
	out["instruction"] = note
	return out
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
