package session

import (
	"context"
	"time"

	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/transport"
)

// terminalNote tells an audio model that a terminal tool's text has been
// shown to the user as the final answer.
const terminalNote = "This text was shown to the user as the final answer. Do not repeat or add to it; end your turn."

// toolCalls runs one upstream toolCall through the orchestrator, off the
// pump so that audio and cancellations keep flowing, and answers the calls
// that are still wanted.
func (v *voice) toolCalls(calls []transport.FunctionCall) {
	turn := v.ensureTurn()
	v.mu.Lock()
	ot := v.ot
	v.mu.Unlock()
	oc := make([]orchestrator.Call, len(calls))
	for i, fc := range calls {
		oc[i] = orchestrator.Call{ID: fc.ID, Name: fc.Name, Args: fc.Args}
	}
	v.toolWG.Add(1)
	go func() {
		defer v.toolWG.Done()
		res := ot.Handle(v.ctx, oc, turnEvents{c: v.c, turn: turn})
		end, ended := ot.End()
		if ended && !modeTransition(ot.Intents()) {
			// In voice the exact text reaches the browser, and the model is
			// told not to add to it.
			v.mu.Lock()
			v.terminal = end.Reason
			v.mu.Unlock()
			v.c.send(protocol.NewTurnText(protocol.TypeTextDone, turn, end.Text))
		}
		var out []transport.FunctionResult
		for _, r := range res {
			if !r.Send || !ot.Answer(r.Call.ID) {
				continue // a duplicate, or cancelled: never answered
			}
			resp := r.Outcome.Response
			if ended && r.Call.ID == end.CallID {
				resp = map[string]any{"output": resp["output"], "instruction": terminalNote}
			}
			out = append(out, transport.FunctionResult{ID: r.Call.ID, Name: r.Call.Name, Response: resp})
		}
		// Intents first: an END_VOICE_SESSION locks barge-in out before the
		// model can start its goodbye.
		v.c.applyIntents(turn, ot.Intents(), v)
		if len(out) > 0 {
			if err := v.upstream().SendToolResponses(out); err != nil {
				v.c.log.Warn("voice: could not send tool responses", "turn", turn, "err", err)
			}
		}
	}()
}

// apply enforces a voice-only intent for the rest of the turn, or starts
// the way back to text.
func (v *voice) apply(t intents.Type) {
	switch t {
	case intents.EndVoiceSession:
		v.beginEnding("end_voice_session")
	case intents.SuppressAudio:
		v.mu.Lock()
		v.suppressAudio = true
		v.mu.Unlock()
	case intents.SuppressTranscript:
		v.mu.Lock()
		v.suppressTranscript = true
		v.mu.Unlock()
	}
}

// beginEnding starts the way back to text: the current answer drains with
// barge-in locked out, then the upstream closes.
func (v *voice) beginEnding(reason string) {
	v.mu.Lock()
	if v.ending {
		v.mu.Unlock()
		return
	}
	v.ending, v.endReason = true, reason
	idle := v.turn == 0
	v.mu.Unlock()
	v.c.log.Info("voice: ending after the current answer", "reason", reason)
	if idle {
		v.goFinishEnding()
	}
}

// goFinishEnding runs finishEnding on a goroutine the connection waits for
// when it stops (it cannot run on the pump: it waits for the pump to end).
func (v *voice) goFinishEnding() {
	v.c.voiceWG.Add(1)
	go func() {
		defer v.c.voiceWG.Done()
		v.finishEnding()
	}()
}

// finishEnding waits until the answer's audio has left the send queue,
// then closes the upstream and returns the session to text.
func (v *voice) finishEnding() {
	deadline := time.Now().Add(30 * time.Second)
	for v.c.q.audioBytes() > 0 && time.Now().Before(deadline) && v.c.ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	v.mu.Lock()
	reason := v.endReason
	v.mu.Unlock()
	v.teardown()
	<-v.done
	v.toolWG.Wait()
	c := v.c
	c.mu.Lock()
	if c.voice == v {
		c.voice = nil
	}
	c.rec.Mode = protocol.ModeText
	c.mu.Unlock()
	c.m.Metrics.SessionsActive.WithLabelValues(protocol.ModeVoice).Dec()
	c.m.Metrics.SessionsActive.WithLabelValues(protocol.ModeText).Inc()
	c.send(protocol.Mode{Type: protocol.TypeMode, Mode: protocol.ModeText, Reason: reason})
	c.persistAsync()
	c.log.Info("voice ended; back to text", "reason", reason)
}

// teardown closes the voice side once: no more audio either way, the
// upstream closed explicitly.
func (v *voice) teardown() {
	v.once.Do(func() {
		v.mu.Lock()
		v.closed = true
		up := v.up
		v.mu.Unlock()
		v.cancel()
		_ = up.Close()
	})
}

// commitVoice adds a voice turn's transcripts to the history and stores
// them with the newest resumption handle, in one round trip.
func (c *conn) commitVoice(entries []transport.Entry, handle string) {
	c.mu.Lock()
	c.rec.ResumeHandle = handle
	c.history = trimHistory(append(c.history, entries...), c.m.cfg.HistoryMax)
	c.mu.Unlock()
	c.writeAsync(func(ctx context.Context, rec store.Record) error {
		return c.m.Store.Append(ctx, rec, entries...)
	})
}

// voiceText sends a typed message into the voice session.
func (v *voice) text(text string) {
	v.ensureTurn()
	v.mu.Lock()
	v.inText.WriteString(text)
	v.mu.Unlock()
	if err := v.upstream().SendText(text); err != nil {
		v.c.send(protocol.NewError(protocol.CodeUpstreamUnavailable, "the message could not reach the model", true, 0))
	}
}
