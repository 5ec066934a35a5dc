package voice

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/session/turnrec"
	"github.com/turnstile-gw/turnstile/tracing"
	"github.com/turnstile-gw/turnstile/transport"
)

// run reads upstream events until the voice side ends, replacing the
// upstream when it goes away.
func (v *Session) run() {
	defer close(v.done)
	defer v.rounds.Wait()
	for {
		up := v.upstream()
		swap, err := v.pump(up)
		v.mu.Lock()
		closed, stopped, ending := v.closed, v.stopped, v.ending
		v.mu.Unlock()
		switch {
		case stopped:
			return
		case closed || ending != "":
			v.finishEnding(up)
			return
		}
		reason := metrics.ConnectGoAway
		if !swap {
			v.d.Metrics.Upstream(metrics.LiveClose, closeCode(err))
			if v.plannedClose() {
				v.d.Log.Info("voice: upstream closed after its goAway; resuming", "err", err)
			} else {
				reason = metrics.ConnectReconnect
				v.d.Log.Warn("voice: upstream closed unexpectedly", "err", err)
				v.failTurns(err)
			}
		}
		switch rerr := v.replace(up, reason); {
		case rerr == nil:
		case errors.Is(rerr, ErrConnectRefused) && v.ctx.Err() == nil:
			// Over the connect budget: voice ends, the session goes on in
			// text (the budget told the browser rate_limited).
			v.mu.Lock()
			v.ending, v.drain = EndRateLimited, false
			v.mu.Unlock()
			v.finishEnding(up)
			return
		default:
			if v.ctx.Err() == nil && !v.isClosed() {
				v.h.Lost(err)
			}
			return
		}
	}
}

// pump handles one upstream's events. It returns swap true when it stopped
// to replace the upstream after a goAway, else the error that ended it.
func (v *Session) pump(up transport.LiveSession) (swap bool, err error) {
	if f, ok := up.(transport.LiveFast); ok {
		f.SetAudioSink(audioSink{v})
	}
	for {
		ev, err := up.Recv()
		if err != nil {
			return false, err
		}
		if v.onEvent(ev) {
			return true, nil
		}
	}
}

// audioSink takes model audio on the upstream's event loop while the
// pump waits in Recv (transport.LiveFast): what onEvent does with an
// audio event, without the pump woken for it. It is ready while the
// browser's writes would not wait either.
type audioSink struct{ v *Session }

func (a audioSink) Ready() bool {
	v := a.v
	v.mu.Lock()
	ok := v.hostFast
	v.mu.Unlock()
	if ok || !v.h.AudioWontWait() {
		return ok
	}
	v.mu.Lock()
	v.hostFast = true // the browser's socket, once on an event loop, stays there
	v.mu.Unlock()
	return true
}

func (a audioSink) Audio(pcm []byte) {
	a.v.onEvent(transport.LiveEvent{Kind: transport.LiveAudio, Audio: pcm})
}

// onEvent acts on one event; it reports true when the upstream should be
// replaced now.
func (v *Session) onEvent(ev transport.LiveEvent) bool {
	if ev.Text != "" {
		// Control characters never reach the browser or the history.
		ev.Text = protocol.StripControl(ev.Text)
	}
	switch ev.Kind {
	case transport.LiveAudio:
		var received time.Time
		if v.modelAudio++; v.modelAudio%RelaySampleEvery == 0 {
			received = clock.Wall.Now()
		}
		v.mu.Lock()
		t := v.modelOutputLocked()
		drop := t.dropReason()
		first := drop == "" && len(ev.Audio) > 0 && !t.voiced
		var response time.Duration
		answered := false
		if first {
			t.voiced = true
			if response, answered = v.speech.answered(v.d.Clock.Now()); answered {
				t.response = response
			}
		}
		v.mu.Unlock()
		if answered {
			v.answered(t, response)
		}
		switch {
		case len(ev.Audio) == 0:
		case drop == "":
			// Written by the pump itself when nothing is queued before it
			// (no writer goroutine woken per frame); a browser too slow to
			// take it is closed 4101 by the host.
			v.h.SendAudio(ev.Audio, received)
		default:
			// Generated, billed and thrown away: the Live API cannot stop
			// a turn's speech once asked for it (docs/operations.md).
			v.d.Metrics.VoiceAudioDrop(drop, v.channel, float64(len(ev.Audio))/ModelAudioBytesPerSecond)
		}
	case transport.LiveInputTranscript:
		v.mu.Lock()
		t := v.ensureTurnLocked()
		t.in.WriteString(ev.Text)
		show := !t.suppressTranscript
		v.mu.Unlock()
		if show {
			v.h.Send(protocol.TranscriptInput{Turn: t.N, Text: ev.Text})
		}
	case transport.LiveOutputTranscript, transport.LiveText:
		v.mu.Lock()
		t := v.modelOutputLocked()
		t.out.WriteString(ev.Text)
		show := !t.suppressTranscript && !t.quiet()
		v.mu.Unlock()
		if show {
			v.h.Send(protocol.TranscriptOutput{Turn: t.N, Text: ev.Text})
		}
	case transport.LiveGenerationComplete:
		v.mu.Lock()
		v.modelOutputLocked()
		v.mu.Unlock()
	case transport.LiveInterrupted:
		v.interrupted()
	case transport.LiveTurnComplete:
		return v.turnComplete()
	case transport.LiveToolCall:
		v.toolCall(ev.Calls)
	case transport.LiveToolCancel:
		v.mu.Lock()
		open := append([]*turn(nil), v.open...)
		v.mu.Unlock()
		for _, t := range open {
			t.Policy.Cancel(ev.IDs...)
		}
		v.d.Log.Info("voice: upstream cancelled tool calls", "calls", ev.IDs)
	case transport.LiveGoAway:
		v.d.Metrics.Upstream(metrics.LiveGoAway, metrics.UpstreamCodeNone)
		v.mu.Lock()
		v.wantSwap = true
		ready := v.handle != "" && v.cur == nil
		v.traceEventLocked(tracing.EventGoAway)
		v.mu.Unlock()
		v.d.Log.Info("voice: upstream going away; will resume on a new connection", "time_left", ev.TimeLeft)
		return ready
	case transport.LiveTokens:
		if u := ev.Usage; u != nil {
			v.d.Metrics.AddVoiceTokens(v.channel, "input", u.Input, u.InputByModality)
			v.d.Metrics.AddVoiceTokens(v.channel, "output", u.Output, u.OutputByModality)
		}
	case transport.LiveResumption:
		if !ev.Resumable || ev.Handle == "" {
			return false
		}
		v.mu.Lock()
		v.handle = ev.Handle
		ready := v.wantSwap && v.cur == nil
		v.mu.Unlock()
		v.h.SaveHandle(ev.Handle)
		return ready
	}
	return false
}

// ensureTurnLocked returns the current turn, starting one at its first
// event.
func (v *Session) ensureTurnLocked() *turn {
	if v.cur != nil {
		return v.cur
	}
	n := v.h.BeginTurn()
	t := &turn{Turn: turnrec.Begin(v.ctx, v.d.Turns, n, protocol.ModeVoice)}
	for _, ev := range v.traceNotes {
		t.Span.AddEvent(ev.name, trace.WithAttributes(ev.attrs...))
	}
	v.traceNotes = nil
	v.cur = t
	v.open = append(v.open, t)
	v.h.Send(protocol.TurnStart{Turn: n})
	return t
}

// modelOutputLocked is ensureTurnLocked for the model's own output: from
// now until turnComplete the model is speaking.
func (v *Session) modelOutputLocked() *turn {
	t := v.ensureTurnLocked()
	v.speaking = true
	if t.began.IsZero() {
		t.began = v.d.Clock.Now()
	}
	return t
}

// answered records a turn's voice-to-voice latency: its first audio went to
// the browser d after the end of the user's speech.
func (v *Session) answered(t *turn, d time.Duration) {
	if v.response != nil {
		v.response.Observe(d.Seconds())
	}
	t.Span.SetAttributes(tracing.AttrVoiceResponseMs.Int64(d.Milliseconds()))
}

// interrupted handles a barge-in: the browser drops the rest of the answer,
// and the turn's tool calls are cancelled. While voice ends, barge-in is
// locked out.
func (v *Session) interrupted() {
	v.mu.Lock()
	t := v.cur
	if v.ending != "" || t == nil {
		v.mu.Unlock()
		return
	}
	t.interrupted = true
	v.mu.Unlock()
	v.h.DropAudio()
	v.h.Send(protocol.Interrupted{Turn: t.N})
	t.Policy.CancelAll()
	tracing.Event(t.Ctx, tracing.EventBargeIn)
	v.d.Log.InfoContext(t.Ctx, "voice: barge-in", "turn", t.N)
}

// turnComplete ends the model's turn: the turn is finalized once its calls
// are answered, input that waited for the model is sent, and a pending
// replacement or ending goes ahead. It reports whether to replace the
// upstream now.
func (v *Session) turnComplete() bool {
	v.mu.Lock()
	t := v.cur
	v.cur, v.speaking = nil, false
	finalize := false
	if t != nil {
		t.completed = true
		finalize = t.rounds == 0
		if !t.voiced {
			v.speech.silent(t.began)
		}
	}
	ending := v.ending != ""
	deferred := v.deferred
	v.deferred = nil
	v.mu.Unlock()
	if finalize {
		v.finalize(t)
	}
	if ending {
		v.closeUpstreamWhenIdle()
		return false
	}
	if note := v.h.TakePending(); note != "" {
		// SET_PENDING_MESSAGE: the model gets it at this turn boundary, as
		// context that asks for no answer.
		if err := v.upstream().SendContext(note); err != nil {
			v.d.Log.Warn("voice: could not deliver the pending message", "err", err)
		}
	}
	for _, u := range deferred {
		v.sendUserTurn(u)
	}
	v.mu.Lock()
	ready := v.wantSwap && v.handle != "" && v.cur == nil
	v.mu.Unlock()
	return ready
}

// sendUserTurn sends input as a complete user turn; it starts a turn when
// none is under way.
func (v *Session) sendUserTurn(u userTurn) {
	v.mu.Lock()
	if v.ending != "" || v.closed {
		v.mu.Unlock()
		return
	}
	t := v.ensureTurnLocked()
	if u.kind == "" {
		t.in.WriteString(u.text)
	} else {
		t.gateway = u.text
	}
	up := v.up
	v.mu.Unlock()
	if err := up.SendText(u.text); err != nil {
		v.d.Log.Warn("voice: could not send input to the model", "kind", u.kind, "err", err)
		v.h.Send(protocol.NewError(protocol.CodeUpstreamUnavailable, "the message could not reach the model", true, t.N))
	}
}

// finalize closes a turn once its turnComplete has come and each of its
// calls is answered or cancelled: the transcripts join the history, and
// turn.done goes out.
func (v *Session) finalize(t *turn) {
	v.mu.Lock()
	if t.finalized {
		v.mu.Unlock()
		return
	}
	t.finalized = true
	for i, o := range v.open {
		if o == t {
			v.open = append(v.open[:i], v.open[i+1:]...)
			break
		}
	}
	v.finishing++ // busy until its turn.done is queued (signalIdle)
	in, out := strings.TrimSpace(t.in.String()), strings.TrimSpace(t.out.String())
	reason := protocol.ReasonEndTurn
	switch {
	case t.failed:
		reason = protocol.ReasonError
	case t.interrupted:
		reason = protocol.ReasonInterrupted
	case t.terminal != nil:
		reason, out = t.terminal.Reason, t.terminal.Text
	}
	handle, response := v.handle, t.response
	idle := len(v.open) == 0
	ending := v.ending != "" && v.drain
	v.mu.Unlock()

	var entries []transport.Entry
	if t.gateway != "" {
		entries = append(entries, transport.Entry{Role: transport.RoleUser, Text: t.gateway, Kind: "confirmation", Turn: t.N})
	}
	if in != "" {
		entries = append(entries, transport.Entry{Role: transport.RoleUser, Text: in, Turn: t.N})
	}
	if out != "" {
		entries = append(entries, transport.Entry{Role: transport.RoleModel, Text: out, Turn: t.N})
	}
	input := in
	if input == "" {
		input = t.gateway
	}
	// Nothing of the turn runs on; it is recorded as a text turn is, before
	// turn.done goes out.
	t.End(turnrec.End{Reason: reason, Entries: entries, Handle: handle, Input: input, Answer: out,
		VoiceResponse: response})
	v.h.Send(protocol.TurnDone{Turn: t.N, Reason: reason})
	v.signalIdle()
	if ending && idle {
		v.closeUpstreamWhenIdle()
	}
}

// signalIdle closes the channel Idle handed out once no turn is open. It
// runs after the turn's end is queued for the browser, so that whoever
// waited (a drain) acts after it.
func (v *Session) signalIdle() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.finishing--
	if !v.busyLocked() && v.idle != nil {
		close(v.idle)
		v.idle = nil
	}
}

// closeUpstreamWhenIdle closes the upstream of a voice side that is ending
// once no turn is open; the pump then lets the audio out.
func (v *Session) closeUpstreamWhenIdle() {
	v.mu.Lock()
	idle := len(v.open) == 0
	v.mu.Unlock()
	if idle {
		v.closeUpstream()
	}
}

// finishEnding runs on the pump when voice ends: the answer's audio leaves
// the browser's queue first (unless the end is immediate), then the host
// is told.
func (v *Session) finishEnding(up transport.LiveSession) {
	_ = up.Close()
	v.mu.Lock()
	reason, drain := v.ending, v.drain
	open := append([]*turn(nil), v.open...)
	v.mu.Unlock()
	for _, t := range open {
		t.Policy.CancelAll()
	}
	if drain {
		v.waitDrained()
	}
	v.cancel()
	v.rounds.Wait()
	for _, t := range open {
		v.failOpen(t)
	}
	if reason == "" {
		reason = "closed"
	}
	v.h.Ended(reason)
}

// waitDrained returns once the browser has been sent the audio queued for
// it, or DrainMax has passed on the clock, or the session is stopped.
func (v *Session) waitDrained() {
	expired := make(chan struct{})
	t := v.d.Clock.AfterFunc(v.cfg.DrainMax, func() { close(expired) })
	defer t.Stop()
	select {
	case <-v.h.AudioDrained():
	case <-expired:
	case <-v.ctx.Done():
	}
}

// failTurns ends the turns cut by an upstream failure, with an honest error.
func (v *Session) failTurns(why error) {
	msg := "the voice connection to the model was lost"
	var ce *transport.CloseError
	if errors.As(why, &ce) {
		msg += " (" + strconv.Itoa(ce.Code) + " " + ce.Reason + ")"
	}
	v.mu.Lock()
	open := append([]*turn(nil), v.open...)
	v.cur, v.speaking = nil, false
	n := 0
	if len(open) > 0 {
		n = open[len(open)-1].N
	}
	v.mu.Unlock()
	v.h.Send(protocol.NewError(protocol.CodeUpstreamClosed, msg+"; reconnecting", true, n))
	if len(open) > 0 {
		v.h.DropAudio()
	}
	for _, t := range open {
		v.failOpen(t)
	}
}

// failOpen finalizes a turn that cannot complete, as an error.
func (v *Session) failOpen(t *turn) {
	t.Policy.CancelAll()
	v.mu.Lock()
	done := t.finalized
	t.failed = true
	t.completed = true
	v.mu.Unlock()
	if !done {
		v.finalize(t)
	}
}

// plannedClose reports whether the upstream closed after its goAway,
// between turns.
func (v *Session) plannedClose() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.wantSwap && v.cur == nil
}

func (v *Session) isClosed() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.closed
}

func closeCode(err error) string {
	var ce *transport.CloseError
	if errors.As(err, &ce) {
		return strconv.Itoa(ce.Code)
	}
	return metrics.UpstreamCodeNone
}
