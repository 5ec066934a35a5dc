package session

import (
	"errors"

	"github.com/turnstile-gw/turnstile/internal/fdroom"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/session/voice"
	"github.com/turnstile-gw/turnstile/store"
)

// The activity's moves into voice and back to text.

// voiceSide returns the voice side, nil in text mode.
func (a *activity) voiceSide() *voice.Session { return a.voice.Load() }

// requestVoice is a move into voice the browser or the model asked for
// (voice.start, session.start in voice, start_voice_session): counted
// against the session's voice starts per minute, then startVoice. It
// reports whether the move goes ahead.
func (a *activity) requestVoice(reason string) bool {
	a.mu.Lock()
	already := a.voice.Load() != nil || a.starting || a.toVoice != ""
	a.mu.Unlock()
	if already {
		return true
	}
	if a.s.handedOff() {
		// Before the voice starts are counted: a person has the
		// conversation, and voice would reach the model.
		a.s.send(protocol.HandoffPending{Message: handoffPendingText})
		return false
	}
	if a.s.m.Live != nil && !a.s.allowVoiceStart() {
		return false
	}
	a.startVoice(reason, "")
	return true
}

// startVoice opens the upstream and moves the session to voice; during a
// text turn, the switch waits for the turn's end. handle resumes an
// earlier upstream session; when that fails a new one is seeded with the
// history.
func (a *activity) startVoice(reason, handle string) {
	s := a.s
	if s.m.Live == nil {
		s.send(protocol.NewError(protocol.CodeUnsupported, "voice is not configured on this gateway", false, 0))
		return
	}
	if _, blocked := s.st.blocked(); blocked {
		s.send(protocol.NewError(protocol.CodeBlocked, "voice is not available while input is refused", false, 0))
		return
	}
	if s.handedOff() {
		s.send(protocol.HandoffPending{Message: handoffPendingText})
		if s.st.mode() == protocol.ModeVoice {
			s.st.update(func(rec *store.Record) { rec.Mode = protocol.ModeText }) // a resume of a voice session
			s.persistMode()
		}
		return
	}
	a.mu.Lock()
	switch {
	case a.voice.Load() != nil || a.starting:
		a.mu.Unlock()
		return
	case a.turnDone != nil || a.admitting != nil:
		a.toVoice = reason
		a.mu.Unlock()
		return
	}
	a.starting = true
	a.mu.Unlock()

	why := metrics.ConnectVoiceStart
	if reason == "resume" {
		why = metrics.ConnectResume
	}
	v, err := voice.Start(s.ctx, s.voiceConfig(), voice.Deps{Live: s.m.Live, Turns: s.turnDeps(),
		Metrics: s.m.Metrics, Log: s.log(),
		Budget: connectBudget{s}, Clock: s.m.cfg.Clock},
		voiceHost{s}, handle, why)

	a.mu.Lock()
	a.starting = false
	if err != nil {
		notes := a.notes
		a.notes = nil
		a.mu.Unlock()
		switch {
		case errors.Is(err, voice.ErrConnectRefused):
			// The budget told the browser; a resumed session stays in
			// text, in the store too (its record said voice).
			s.persistMode()
		case errors.Is(err, fdroom.ErrFull):
			s.log().Warn("voice refused: no file descriptor left on this node for the model connection; "+
				"raise the open-file limit or add nodes", "reason", reason)
			s.send(protocol.NewError(protocol.CodeUpstreamUnavailable,
				"this server has no room for another voice connection right now; the conversation stays in text, try voice again later",
				true, 0))
			s.persistMode()
		case s.ctx.Err() == nil:
			s.log().Error("voice: upstream unavailable", "err", err)
			s.send(protocol.NewError(protocol.CodeUpstreamUnavailable,
				"voice is unavailable right now; the conversation stays in text", true, 0))
		}
		for _, n := range notes {
			a.confirmed(n)
		}
		return
	}
	a.voice.Store(v)
	notes := a.notes
	a.notes = nil
	a.mu.Unlock()
	s.setMode(protocol.ModeVoice, reason)
	s.log().Info("voice started", "reason", reason, "resumed_upstream", v.Resumed())
	for _, n := range notes {
		v.Confirmed(n.model)
	}
}

// endVoice starts the way back to text (voice.stop).
func (a *activity) endVoice(reason string) {
	if v := a.voiceSide(); v != nil {
		v.End(reason)
	}
}

// voiceEnded is the voice side telling that the session is back in text.
func (a *activity) voiceEnded(reason string) {
	a.mu.Lock()
	a.voice.Store(nil)
	a.mu.Unlock()
	a.s.out.voiceOff() // after the voice side is gone (see micReads)
	a.s.setMode(protocol.ModeText, reason)
	a.s.log().Info("voice ended; back to text", "reason", reason)
}

// blockVoice ends voice at once for a block.
func (a *activity) blockVoice() {
	if v := a.voiceSide(); v != nil {
		v.Block()
	}
}
