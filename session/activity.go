package session

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnstile-gw/turnstile/internal/stages"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/session/textturn"
	"github.com/turnstile-gw/turnstile/session/turnrec"
	"github.com/turnstile-gw/turnstile/session/voice"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/transport"
)

// activity is what the session is doing: at most one text turn, or the
// voice side. It is the one owner of that, under one lock; the text loop
// and the voice side run outside it.
type activity struct {
	// voice is the voice side (nil in text), set under mu and read
	// without it: the reader looks at it for every microphone frame. It
	// comes first: on the session's cache line that holds st too.
	voice atomic.Pointer[voice.Session]
	s     *session

	mu         sync.Mutex
	turnCancel context.CancelCauseFunc // the running text turn
	turnDone   chan struct{}           // closed when it has ended
	// admitting is closed when a typed turn that waits for the store's
	// verdict before its model request (admit.go) has it; nil when none
	// waits. The lock is not held during that round trip.
	admitting chan struct{}
	starting  bool          // a voice upstream is being opened
	toVoice   string        // switch to voice when the text turn ends (the reason)
	notes     []confirmNote // confirmation outcomes waiting for the text turn to end
	// turnsUntil: the user's turns per minute are used up until then (as
	// the store said); typed input is refused here without asking again.
	turnsUntil time.Time
	// verdictFirst: the last typed turn was refused, so the next one asks
	// the store before it asks the model (admit.go).
	verdictFirst bool
	// voiceTexts numbers the texts typed in voice, which count against the
	// turn limit under members of their own (allowVoiceText).
	voiceTexts atomic.Uint64
	wg         sync.WaitGroup
}

// text takes a message the user typed. A text turn it starts is returned
// as openTextTurn returns it, for the conversation's goroutine to run.
func (a *activity) text(text string) (run, admit func()) {
	if until, blocked := a.s.st.blocked(); blocked {
		a.s.send(protocol.NewError(protocol.CodeBlocked, "input is refused until "+until.Format(time.RFC3339), false, 0))
		return nil, nil
	}
	if a.s.handedOff() {
		a.s.holdForPerson(text)
		return nil, nil
	}
	if v := a.voiceSide(); v != nil {
		if a.allowVoiceText() {
			v.Text(text)
		}
		return nil, nil
	}
	return a.openTextTurn(text, "")
}

// startTextTurn accepts a user input: it is in the history (and, unless
// Redis is down, in the store) before the model is called, then the turn
// runs in its own goroutine so that the conversation's inputs (inbox.go)
// can still take turn.cancel and confirm. kind is "" for typed text and "confirmation" for the
// outcome of a confirm.request.
func (a *activity) startTextTurn(text, kind string) {
	run, admit := a.openTextTurn(text, kind)
	if run != nil {
		go run()
	}
	if admit != nil {
		admit()
	}
}

// openTextTurn is startTextTurn without its goroutine: it returns the
// turn's body when the model request is to start at once (run: the caller
// runs it on a goroutine, and ends the turn by running it), and the
// store's round trip that admits or refuses the turn (admit: the caller
// runs it alongside run, or alone). Neither when the input is refused
// here.
func (a *activity) openTextTurn(text, kind string) (run, admit func()) {
	s := a.s
	if s.m.isDraining() {
		s.send(protocol.NewError(protocol.CodeDraining, "the gateway is restarting; reconnect and send again", true, 0))
		return nil, nil
	}
	a.mu.Lock()
	if s.closing() {
		a.mu.Unlock()
		return nil, nil // the connection is closing: take no new turn
	}
	if a.busyLocked() {
		a.mu.Unlock()
		s.send(protocol.NewError(protocol.CodeTurnInProgress,
			"a turn is running; wait for turn.done or send turn.cancel", true, 0))
		return nil, nil
	}
	typed := kind == ""
	if now := s.m.now(); typed && a.s.m.cfg.TurnsPerMinute > 0 && now.Before(a.turnsUntil) {
		wait := a.turnsUntil.Sub(now)
		a.mu.Unlock()
		a.refuseTurn(wait)
		return nil, nil
	}
	lim := a.turnLimit()
	if !typed {
		// The gateway's own turns (a confirmation's outcome) do not count,
		// and the storage quota does not refuse them.
		lim.Max, lim.QuotaExempt = 0, true
	}
	user := transport.Entry{Role: transport.RoleUser, Text: text, Kind: kind}
	turn, note := s.st.beginTurn(&user, true)
	var early *admission
	var cancelEarly context.CancelCauseFunc
	var earlyDone chan struct{}
	if !a.verdictFirst {
		// The model request starts now; the store's answer comes alongside.
		early = newAdmission()
		run = a.launch(turn, text, note, early)
		cancelEarly, earlyDone = a.turnCancel, a.turnDone
	} else {
		a.admitting = make(chan struct{})
	}
	// The store's round trip runs without the lock: the turn (or the
	// admitting mark) keeps any other turn out meanwhile, and a turn that
	// waits for its verdict sends nothing before it (textturn.Deps.Admitted).
	a.mu.Unlock()
	return run, func() { a.admit(text, kind, turn, note, user, lim, early, cancelEarly, earlyDone) }
}

// admit is a text turn's first store write and what its verdict decides:
// the turn refused and cleared, or turn.start sent and the turn started
// (or, started early, let go on).
func (a *activity) admit(text, kind string, turn int, note string, user transport.Entry, lim store.TurnLimit,
	early *admission, cancelEarly context.CancelCauseFunc, earlyDone chan struct{}) {
	s := a.s
	stages.Mark(stages.Launched)
	ts := s.persistBegin(user, lim)
	stages.Mark(stages.Verdict)
	blocked := s.m.now().Before(ts.Block.Until)
	refused := blocked || !ts.Allowed || ts.OverQuota || s.closing()
	a.mu.Lock()
	if a.admitting != nil {
		close(a.admitting)
		a.admitting = nil
	}
	a.verdictFirst = refused
	if refused {
		// Refused after all (blocked on another node since this connection
		// last looked, the user's turns per minute or storage quota used up,
		// or the session taken over): the input must not stay in the history.
		if early != nil {
			early.decide(false)
			cancelEarly(errNotAdmitted) // the request ends now, not at its first chunk
			<-earlyDone
			a.turnCancel, a.turnDone = nil, nil
		}
		s.st.undoTurn(note)
		s.pst.undo(turn)
		if !ts.Allowed {
			a.turnsUntil = s.m.now().Add(ts.RetryAfter)
		}
		// What waited for the turn's end (a confirmation's outcome, a move
		// into voice, asked meanwhile) goes ahead now: no turn will end.
		toVoice, next := a.takeWaitingLocked()
		a.mu.Unlock()
		defer a.runWaiting(toVoice, next)
		switch {
		case blocked:
			s.setBlocked(ts.Block)
			s.send(protocol.NewError(protocol.CodeBlocked, "input is refused until "+ts.Block.Until.Format(time.RFC3339), false, 0))
		case !ts.Allowed:
			a.refuseTurn(ts.RetryAfter)
		case ts.OverQuota:
			s.refused(limitStorageQuota, s.m.now())
			s.send(protocol.NewError(protocol.CodeQuotaExceeded, fmt.Sprintf("your stored conversations (%d KiB) "+
				"have reached their storage quota: the message was not accepted. Space frees as older conversations expire",
				ts.StoredBytes>>10), false, 0))
		}
		return
	}
	defer a.mu.Unlock()
	s.timeline().Begin(turn, string(protocol.ModeText), text, kind)
	s.send(protocol.TurnStart{Turn: turn, Text: text, Kind: kind})
	if early != nil {
		early.decide(true)
		return
	}
	go a.launch(turn, text, note, nil)()
}

// launch opens text turn turn and returns its body, for the caller to run
// on a goroutine; with an admission, the turn waits for its verdict
// before it acts on anything the model sent. a.mu is held.
func (a *activity) launch(turn int, text, note string, adm *admission) (run func()) {
	ctx, cancel := context.WithCancelCause(a.s.ctx)
	done := make(chan struct{})
	a.turnCancel, a.turnDone = cancel, done
	a.wg.Add(1)
	return func() {
		defer a.wg.Done()
		defer close(done)
		defer cancel(nil)
		a.runTextTurn(ctx, turn, text, note, adm)
	}
}

// runTextTurn runs one text turn, ends it, and starts what waited for it:
// a switch to voice, or the turn telling the model a confirmation outcome.
// A turn its admission refuses ends at once, leaving no trace.
func (a *activity) runTextTurn(ctx context.Context, turn int, input, note string, adm *admission) {
	stages.Mark(stages.TurnRuns)
	s := a.s
	tr := turnrec.Begin(ctx, s.turnDeps(), turn, protocol.ModeText)
	var ignored []protocol.IgnoredIntent
	deps := textturn.Deps{Model: s.m.Model, Metrics: s.m.Metrics, Log: s.log(), Observe: s.observeRequest}
	if adm != nil {
		deps.Admitted = adm.wait
	}
	reason := textturn.Run(tr.Ctx, s.textConfig(), deps, textHost{s: s, ignored: &ignored}, tr.Policy, note)
	if reason == textturn.ReasonNotAdmitted {
		// startTextTurn refuses the turn and clears it; a trace shows a turn
		// (and its cancelled model request) that was not admitted.
		tr.Drop(reason)
		return
	}
	tr.End(turnrec.End{Reason: reason, Input: input})

	// turn.done goes out and the turn is cleared in one step, so that a
	// browser answering turn.done at once is never told a turn is running.
	a.mu.Lock()
	s.send(protocol.TurnDone{Turn: turn, Reason: reason, IgnoredIntents: ignored})
	a.turnCancel, a.turnDone = nil, nil
	toVoice, next := a.takeWaitingLocked()
	a.mu.Unlock()
	a.runWaiting(toVoice, next)
}

// busyLocked reports whether a text turn runs or is being admitted, or
// voice is on or starting. a.mu is held.
func (a *activity) busyLocked() bool {
	return a.turnDone != nil || a.admitting != nil || a.voice.Load() != nil || a.starting
}

// takeWaitingLocked takes what waited for the text turn's end: a move into
// voice, else the next confirmation outcome. a.mu is held.
func (a *activity) takeWaitingLocked() (toVoice string, next *confirmNote) {
	toVoice, a.toVoice = a.toVoice, ""
	if len(a.notes) > 0 && toVoice == "" {
		next, a.notes = &a.notes[0], a.notes[1:]
	}
	return toVoice, next
}

// runWaiting starts what waited for a text turn's end (takeWaitingLocked).
func (a *activity) runWaiting(toVoice string, next *confirmNote) {
	if a.s.ctx.Err() != nil {
		return
	}
	switch {
	case toVoice != "":
		a.startVoice(toVoice, "") // counted when it was asked for
	case next != nil:
		a.confirmed(*next) // unless a person has the conversation now
	}
}

// cancelTurn cancels the running text turn (turn.cancel).
func (a *activity) cancelTurn() {
	a.mu.Lock()
	cancel := a.turnCancel
	a.mu.Unlock()
	if cancel != nil {
		cancel(textturn.ErrCancelled)
	}
}

// confirmed delivers a confirmation outcome to the model: through the
// voice side in voice, else in a text turn of its own — now, or as soon
// as the running turn ends.
func (a *activity) confirmed(note confirmNote) {
	if a.s.handedOff() {
		a.s.holdConfirmation(note) // a person has the conversation: no model turn
		return
	}
	a.mu.Lock()
	v := a.voice.Load()
	if v == nil && (a.turnDone != nil || a.admitting != nil || a.starting) {
		a.notes = append(a.notes, note)
		a.mu.Unlock()
		return
	}
	a.mu.Unlock()
	if v != nil {
		v.Confirmed(note.model)
		return
	}
	a.startTextTurn(note.model, "confirmation")
}

// waitIdle returns when neither a text turn nor a voice turn is under
// way, or ctx ends, or the connection has ended.
func (a *activity) waitIdle(ctx context.Context, connDone <-chan struct{}) {
	waiting := false
	defer func() {
		if waiting {
			a.s.m.Metrics.DrainWaiting.Dec()
		}
	}()
	for {
		a.mu.Lock()
		td, v := a.turnDone, a.voice.Load()
		if td == nil {
			td = a.admitting // a turn being admitted may run
		}
		a.mu.Unlock()
		if !waiting && (td != nil || v != nil && v.Busy()) {
			waiting = true
			a.s.m.Metrics.DrainWaiting.Inc()
		}
		switch {
		case td != nil:
			select {
			case <-td:
				continue
			case <-ctx.Done():
				return
			case <-connDone:
				return
			}
		case v != nil && v.Busy():
			select {
			case <-v.Idle():
				continue
			case <-v.Done():
				// Over with turns still open: none of them will end now.
				if a.voiceSide() == v {
					return
				}
				continue
			case <-ctx.Done():
				return
			case <-connDone:
				return
			}
		}
		return
	}
}

// stop ends everything the session is doing, because the connection is
// going away, and waits for it.
func (a *activity) stop() {
	a.cancelTurn()
	a.wg.Wait()
	if v := a.voice.Load(); v != nil {
		v.Stop()
		a.s.st.update(func(rec *store.Record) { rec.ResumeHandle = v.Handle() })
	}
}
