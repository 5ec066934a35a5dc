package voice

import (
	"time"

	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tracing"
	"github.com/turnstile-gw/turnstile/transport"
)

// toolCall runs one upstream toolCall through the orchestrator's Round, off
// the pump so that audio and cancellations keep flowing. The call belongs
// to the current turn, which does not end before it is answered or
// cancelled, even when the model's turnComplete comes first.
func (v *Session) toolCall(calls []transport.FunctionCall) {
	v.mu.Lock()
	t := v.modelOutputLocked()
	t.rounds++
	v.mu.Unlock()
	v.rounds.Add(1)
	go func() {
		defer v.rounds.Done()
		rd := t.Policy.Round(t.Ctx, calls, v.h.ToolEvents(t.N))
		v.afterRound(t, rd)
	}()
}

// afterRound applies a round's outcome: intents first (an
// END_VOICE_SESSION locks barge-in out before the model can start its
// goodbye), then a terminal answer is shown, the turn is finalized if it
// was only waiting for this round, and the answers go upstream — after the
// finalization, so that turn.done precedes anything the model says next.
func (v *Session) afterRound(t *turn, rd orchestrator.Round) {
	intents.Apply(rd.Intents, target{v, t}, func(in intents.Intent, applied bool) {
		v.h.IntentApplied(t.N, in.Type, applied)
	})
	v.mu.Lock()
	show := rd.End != nil && t.terminal == nil
	if show {
		end := *rd.End
		t.terminal = &end
	}
	t.rounds--
	finalize := t.completed && t.rounds == 0
	up := v.up
	v.mu.Unlock()
	if show {
		// In voice the exact text reaches the browser; the model was told
		// not to add to it, and whatever it still says is not shown.
		v.h.Send(protocol.TextDone{Turn: t.N, Text: rd.End.Text})
	}
	if finalize {
		v.finalize(t)
	}
	if len(rd.Responses) > 0 {
		if err := up.SendToolResponses(rd.Responses); err != nil {
			v.d.Log.WarnContext(t.Ctx, "voice: could not send tool responses", "turn", t.N, "err", err)
		}
	}
}

// target applies intents to the voice side for one turn.
type target struct {
	v *Session
	t *turn
}

func (g target) BlockUser(d time.Duration, reason string) bool {
	g.v.h.BlockUser(d, reason)
	return true
}

func (g target) SetPendingMessage(msg string) bool {
	g.v.h.SetPendingMessage(msg)
	return true
}

func (g target) StartVoiceSession() bool { return false } // already in voice

func (g target) EndVoiceSession() bool {
	g.v.End("end_voice_session")
	return true
}

// HandOff hands the conversation to a person, then ends voice as
// end_voice_session does: the model's closing words are spoken first.
func (g target) HandOff(reason, summary string) bool {
	g.v.h.HandOff(g.t.N, reason, summary)
	g.v.End("handoff")
	return true
}

func (g target) SuppressAudio() bool {
	g.v.mu.Lock()
	g.t.suppressAudio = true
	g.v.mu.Unlock()
	tracing.Event(g.t.Ctx, tracing.EventSuppressAudio)
	return true
}

func (g target) SuppressTranscript() bool {
	g.v.mu.Lock()
	g.t.suppressTranscript = true
	g.v.mu.Unlock()
	tracing.Event(g.t.Ctx, tracing.EventSuppressScript)
	return true
}
