package timeline

import (
	"sync"
	"time"

	"github.com/turnstile-gw/turnstile/internal/clock"
)

// Recorder builds one session's timeline entries as its turns run. Turns
// are keyed by number, since voice turns overlap (a turn's calls may still
// run while the next turn starts). Tool events come from the
// orchestrator's goroutines, so it locks; it costs a map lookup per event
// and nothing per audio frame. Events wait in it until the next write
// (Take).
type Recorder struct {
	session string
	user    string // pseudonym
	node    string
	now     func() time.Time

	mu     sync.Mutex
	open   map[int]*Turn
	events []Event
}

// maxPendingEvents bounds the events waiting for a write.
const maxPendingEvents = 64

// NewRecorder records the timeline of session for the user of pseudonym
// user, on node.
func NewRecorder(session, user, node string, now func() time.Time) *Recorder {
	if now == nil {
		now = clock.Wall.Now
	}
	return &Recorder{session: session, user: user, node: node, now: now, open: map[int]*Turn{}}
}

// Begin opens turn n in mode; input is what the user typed ("" in voice,
// where the transcript comes at the end), kind its kind ("" or
// "confirmation").
func (r *Recorder) Begin(n int, mode, input, kind string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t := &Turn{Kind: KindTurn, Session: r.session, User: r.user, Node: r.node, Turn: n, Mode: mode,
		Start: r.now().UTC(), InputKind: kind}
	t.Input, t.Truncated = Clip(input, MaxText)
	r.open[n] = t
}

// turnLocked is the open turn n, opening it when a call comes for a turn not
// begun here (a voice turn resumed on this node); r.mu is held.
func (r *Recorder) turnLocked(n int) *Turn {
	t := r.open[n]
	if t == nil {
		t = &Turn{Kind: KindTurn, Session: r.session, User: r.user, Node: r.node, Turn: n, Start: r.now().UTC()}
		r.open[n] = t
	}
	return t
}

// CallReceived lists a call of turn n with its allow-listed arguments.
func (r *Recorder) CallReceived(n int, id, tool string, args map[string]any) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.turnLocked(n)
	t.CallCount++
	if len(t.Calls) >= MaxCalls {
		t.Truncated = true
		return
	}
	t.Calls = append(t.Calls, Call{ID: id, Tool: tool, Args: clipFields(args)})
}

// CallFinished records a call's outcome: ok, or its error type, refused
// when the gateway answered without running the tool; result is the
// allow-listed part of a successful result.
func (r *Recorder) CallFinished(n int, id, tool string, ok, refused bool, errType string, d time.Duration,
	result map[string]any) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.turnLocked(n)
	for i := range t.Calls {
		c := &t.Calls[i]
		if c.ID != id || c.Outcome != "" {
			continue
		}
		switch {
		case ok:
			c.Outcome = OutcomeOK
		case refused:
			c.Outcome = OutcomeRefused
		default:
			c.Outcome = OutcomeError
		}
		c.ErrorType, c.DurationMs, c.Result = errType, d.Milliseconds(), clipFields(result)
		return
	}
}

// ConfirmAsked records that a call of turn n waits for the user.
func (r *Recorder) ConfirmAsked(n int, tool string, expires time.Time) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.turnLocked(n)
	if len(t.Confirmations) < MaxConfirmations {
		t.Confirmations = append(t.Confirmations, Confirmation{Tool: tool, Outcome: "asked", ExpiresAt: expires.UTC()})
	}
}

// Answer notes the newest answer text of turn n (a text turn's model
// text, committed as it goes).
func (r *Recorder) Answer(n int, text string) {
	if r == nil || text == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.turnLocked(n)
	var cut bool
	t.Answer, cut = Clip(text, MaxText)
	t.Truncated = t.Truncated || cut
}

// Finish closes turn n and returns its entry: the input (when the turn
// learnt it only now, as a voice transcript), the answer ("" keeps the
// one noted with Answer) and the reason. ok is false when the turn was
// not open.
func (r *Recorder) Finish(n int, reason, input, answer string, voiceResponse time.Duration) (Turn, bool) {
	if r == nil {
		return Turn{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.open[n]
	if !ok {
		return Turn{}, false
	}
	delete(r.open, n)
	t.End, t.EndReason = r.now().UTC(), reason
	var cut bool
	if input != "" && t.Input == "" {
		t.Input, cut = Clip(input, MaxText)
		t.Truncated = t.Truncated || cut
	}
	if answer != "" {
		t.Answer, cut = Clip(answer, MaxText)
		t.Truncated = t.Truncated || cut
	}
	if voiceResponse > 0 {
		ms := voiceResponse.Milliseconds()
		t.VoiceResponseMs = &ms
	}
	return *t, true
}

// Event notes an event of the session; it waits for the next write.
func (r *Recorder) Event(ev Event) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ev.Kind, ev.Session, ev.Node = KindEvent, r.session, r.node
	if ev.At.IsZero() {
		ev.At = r.now().UTC()
	}
	if len(r.events) >= maxPendingEvents {
		r.events = r.events[1:]
	}
	r.events = append(r.events, ev)
}

// TakeEvents returns the events waiting for a write, oldest first, and
// forgets them.
func (r *Recorder) TakeEvents() []Event {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	evs := r.events
	r.events = nil
	return evs
}
