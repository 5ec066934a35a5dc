package session

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/transport"
)

// voice is a connection's realtime side while its session is in voice
// mode: the upstream Live session, the current voice turn, and the state
// that lets the upstream be replaced without the browser noticing.
//
// Goroutines: the pump (run) is the only reader of upstream events; tool
// calls run in goroutines of their own (toolWG); the adapter has its own
// single sender. The reader goroutine of the connection forwards the
// microphone through micAudio.
type voice struct {
	c      *conn
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when run has returned
	toolWG sync.WaitGroup
	once   sync.Once // teardown

	mu        sync.Mutex
	up        transport.LiveSession
	handle    string // newest resumable handle
	turn      int    // current turn number, 0 between turns
	ot        *orchestrator.Turn
	inText    strings.Builder // this turn's input transcript (and typed text)
	outText   strings.Builder // this turn's output transcript
	interrupt bool            // the turn was interrupted by the user
	// Per-turn intents, enforced by the gateway.
	suppressAudio, suppressTranscript bool
	// Ending: the current answer drains, barge-in is locked out, then the
	// upstream closes and the session returns to text.
	ending    bool
	endReason string
	// Swapping: the upstream is being replaced; microphone audio is kept
	// (bounded) until the new one is up.
	swapping bool
	wantSwap bool // goAway seen: swap at the next resumable handle
	buffered [][]byte
	bufBytes int
	closed   bool
	dropped  int // microphone bytes dropped (backpressure or buffer full)
	terminal string
}

// micBufferMax bounds the microphone audio kept while the upstream is
// replaced: 10 s of 16 kHz PCM16.
const micBufferMax = 10 * 16000 * 2

// startVoice opens the upstream and moves the session to voice. handle
// resumes an earlier upstream session; when that fails the gateway opens a
// new one seeded with the history.
func (c *conn) startVoice(reason, handle string) bool {
	if c.m.Live == nil {
		c.send(protocol.NewError(protocol.CodeUnsupported, "voice is not configured on this gateway", false, 0))
		return false
	}
	c.mu.Lock()
	if c.voice != nil {
		c.mu.Unlock()
		return true
	}
	c.mu.Unlock()
	up, err := c.connectLive(handle)
	if err != nil && handle != "" {
		c.log.Warn("voice: could not resume the upstream session; starting a new one", "err", err)
		up, err = c.connectLive("")
		handle = ""
	}
	if err != nil {
		c.log.Error("voice: upstream unavailable", "err", err)
		c.m.Metrics.UpstreamEvents.WithLabelValues("live", "error", closeCode(err)).Inc()
		c.send(protocol.NewError(protocol.CodeUpstreamUnavailable,
			"voice is unavailable right now; the conversation stays in text", true, 0))
		return false
	}
	ctx, cancel := context.WithCancel(c.ctx)
	v := &voice{c: c, ctx: ctx, cancel: cancel, done: make(chan struct{}), up: up, handle: handle}
	c.mu.Lock()
	old := c.rec.Mode
	c.voice = v
	c.rec.Mode = protocol.ModeVoice
	c.mu.Unlock()
	c.m.Metrics.SessionsActive.WithLabelValues(old).Dec()
	c.m.Metrics.SessionsActive.WithLabelValues(protocol.ModeVoice).Inc()
	c.send(protocol.Mode{Type: protocol.TypeMode, Mode: protocol.ModeVoice, Reason: reason})
	c.log.Info("voice started", "reason", reason, "resumed_upstream", handle != "")
	c.persistAsync()
	c.voiceWG.Add(1)
	go func() {
		defer c.voiceWG.Done()
		v.run()
	}()
	return true
}

// stopVoice ends voice at once (the connection is going away) and waits
// for its goroutines.
func (c *conn) stopVoice() {
	c.mu.Lock()
	v := c.voice
	c.mu.Unlock()
	if v != nil {
		v.shutdown()
	}
	c.voiceWG.Wait()
}

func (c *conn) voiceSession() *voice {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.voice
}

// run reads upstream events until the voice side ends, replacing the
// upstream when it goes away.
func (v *voice) run() {
	defer close(v.done)
	for {
		up := v.upstream()
		swap, why := v.pump(up)
		if v.ctx.Err() != nil || v.isClosed() {
			return
		}
		if !swap {
			v.c.m.Metrics.UpstreamEvents.WithLabelValues("live", "close", closeCode(why)).Inc()
			v.mu.Lock()
			planned := v.wantSwap && v.turn == 0 // closed after a goAway, between turns
			v.mu.Unlock()
			if planned {
				v.c.log.Info("voice: upstream closed after its goAway; resuming", "err", why)
			} else {
				v.c.log.Warn("voice: upstream closed unexpectedly", "err", why)
				v.failTurn(why)
			}
		}
		if !v.replace() {
			v.lost(why)
			return
		}
	}
}

// pump handles one upstream's events; it returns true when it stopped to
// replace the upstream after a goAway, else why the upstream ended.
func (v *voice) pump(up transport.LiveSession) (bool, error) {
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

// onEvent acts on one event; it reports true when the upstream should be
// replaced now.
func (v *voice) onEvent(ev transport.LiveEvent) bool {
	c := v.c
	switch ev.Kind {
	case transport.LiveAudio:
		turn := v.ensureTurn()
		v.mu.Lock()
		// After a barge-in, the rest of the interrupted answer is not heard.
		suppress := v.suppressAudio || v.interrupt
		v.mu.Unlock()
		// ev.Audio is only valid until the next Recv: the queue gets a copy.
		if !suppress && len(ev.Audio) > 0 && !c.q.pushAudio(append([]byte(nil), ev.Audio...)) {
			c.tooSlow()
		}
		_ = turn
	case transport.LiveInputTranscript:
		turn := v.ensureTurn()
		v.mu.Lock()
		v.inText.WriteString(ev.Text)
		v.mu.Unlock()
		c.send(protocol.NewTurnText(protocol.TypeTranscriptIn, turn, ev.Text))
	case transport.LiveOutputTranscript, transport.LiveText:
		turn := v.ensureTurn()
		v.mu.Lock()
		v.outText.WriteString(ev.Text)
		suppress := v.suppressTranscript
		v.mu.Unlock()
		if !suppress {
			c.send(protocol.NewTurnText(protocol.TypeTranscriptOut, turn, ev.Text))
		}
	case transport.LiveInterrupted:
		v.interrupted()
	case transport.LiveTurnComplete:
		v.endTurn()
		v.mu.Lock()
		ready := v.wantSwap && v.handle != ""
		v.mu.Unlock()
		return ready // a goAway came during the turn: swap now that it is over
	case transport.LiveToolCall:
		v.toolCalls(ev.Calls)
	case transport.LiveToolCancel:
		v.mu.Lock()
		ot := v.ot
		v.mu.Unlock()
		if ot != nil {
			ot.Cancel(ev.IDs...)
		}
		c.log.Info("voice: upstream cancelled tool calls", "calls", ev.IDs)
	case transport.LiveGoAway:
		c.m.Metrics.UpstreamEvents.WithLabelValues("live", "goaway", "none").Inc()
		c.log.Info("voice: upstream going away; will resume on a new connection", "time_left", ev.TimeLeft)
		v.mu.Lock()
		v.wantSwap = true
		ready := v.handle != "" && v.turn == 0
		v.mu.Unlock()
		return ready
	case transport.LiveResumption:
		v.mu.Lock()
		if ev.Resumable && ev.Handle != "" {
			v.handle = ev.Handle
		}
		ready := v.wantSwap && ev.Resumable && v.handle != "" && v.turn == 0
		v.mu.Unlock()
		return ready
	case transport.LiveGenerationComplete:
	}
	return false
}

// ensureTurn starts a voice turn at its first event.
func (v *voice) ensureTurn() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.turn != 0 {
		return v.turn
	}
	c := v.c
	c.mu.Lock()
	c.rec.Turn++
	c.turns++
	v.turn = c.rec.Turn
	note := c.rec.PendingMessage
	c.rec.PendingMessage = ""
	c.mu.Unlock()
	v.ot = c.m.Orchestrator.NewTurn(orchestrator.Session{ID: c.rec.ID, UserID: c.user, Mode: protocol.ModeVoice}, v.turn, c.loops)
	v.inText.Reset()
	v.outText.Reset()
	v.interrupt, v.suppressAudio, v.suppressTranscript, v.terminal = false, false, false, ""
	c.send(protocol.TurnText{Type: protocol.TypeTurnStart, Turn: v.turn})
	if note != "" {
		// SET_PENDING_MESSAGE: the model gets it with this turn.
		_ = v.up.SendContext(note)
	}
	return v.turn
}

// interrupted handles a barge-in: queued audio towards the browser is
// dropped, the browser flushes its playback, and the turn's tool calls are
// cancelled. While the session is ending, barge-in is locked out.
func (v *voice) interrupted() {
	v.mu.Lock()
	if v.ending || v.turn == 0 {
		v.mu.Unlock()
		return
	}
	v.interrupt = true
	turn, ot := v.turn, v.ot
	v.mu.Unlock()
	v.c.q.dropAudio()
	v.c.send(protocol.Interrupted{Type: protocol.TypeAudioInterrupted, Turn: turn})
	ot.CancelAll()
	v.c.log.Info("voice: barge-in", "turn", turn)
}

// endTurn closes the current voice turn at the upstream's turnComplete:
// the transcripts join the history, and turn.done goes out.
func (v *voice) endTurn() {
	v.mu.Lock()
	if v.turn == 0 {
		v.mu.Unlock()
		return
	}
	turn, ot := v.turn, v.ot
	in, out := strings.TrimSpace(v.inText.String()), strings.TrimSpace(v.outText.String())
	reason := protocol.ReasonEndTurn
	switch {
	case v.interrupt:
		reason = protocol.ReasonInterrupted
	case v.terminal != "":
		reason = v.terminal
	}
	v.turn, v.ot = 0, nil
	ending := v.ending
	v.mu.Unlock()

	ot.CancelAll()
	var entries []transport.Entry
	if in != "" {
		entries = append(entries, transport.Entry{Role: transport.RoleUser, Text: in, Turn: turn})
	}
	if out != "" {
		entries = append(entries, transport.Entry{Role: transport.RoleModel, Text: out, Turn: turn})
	}
	v.c.commitVoice(entries, v.currentHandle())
	v.c.send(protocol.TurnDone{Type: protocol.TypeTurnDone, Turn: turn, Reason: reason})
	v.c.m.Metrics.Turns.WithLabelValues(protocol.ModeVoice, reason).Inc()
	v.c.m.Metrics.ToolCallsPerTurn.WithLabelValues(protocol.ModeVoice).Observe(float64(ot.Calls()))
	v.c.log.Info("voice turn done", "turn", turn, "reason", reason, "tool_calls", ot.Calls())
	if ending {
		v.goFinishEnding()
	}
}

// failTurn ends a turn cut by an upstream failure, with an honest error.
func (v *voice) failTurn(why error) {
	v.mu.Lock()
	turn, ot := v.turn, v.ot
	v.turn, v.ot = 0, nil
	v.mu.Unlock()
	msg := "the voice connection to the model was lost"
	var ce *transport.CloseError
	if errors.As(why, &ce) {
		msg += " (" + strconv.Itoa(ce.Code) + " " + ce.Reason + ")"
	}
	v.c.send(protocol.NewError(protocol.CodeUpstreamClosed, msg+"; reconnecting", true, turn))
	if turn == 0 {
		return
	}
	ot.CancelAll()
	v.c.q.dropAudio()
	v.c.send(protocol.TurnDone{Type: protocol.TypeTurnDone, Turn: turn, Reason: protocol.ReasonError})
	v.c.m.Metrics.Turns.WithLabelValues(protocol.ModeVoice, protocol.ReasonError).Inc()
}

func (v *voice) upstream() transport.LiveSession {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.up
}

func (v *voice) currentHandle() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.handle
}

func (v *voice) isClosed() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.closed
}

// shutdown closes the upstream and waits for the voice goroutines.
func (v *voice) shutdown() {
	v.teardown()
	<-v.done
	v.toolWG.Wait()
}

func closeCode(err error) string {
	var ce *transport.CloseError
	if errors.As(err, &ce) {
		return strconv.Itoa(ce.Code)
	}
	return "none"
}
