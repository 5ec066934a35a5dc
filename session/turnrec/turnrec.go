// Package turnrec begins and ends a turn the same way in text and in voice:
// its trace (the invoke_agent root span), the orchestrator's turn (the
// turn's policy, which records it once: metrics, log, ledger) and the
// session's own record of it (the operator timeline's entry and the store
// write, through Sink). The text loop and the voice side begin every turn
// with Begin and end it with Turn.End; neither ends a span, a policy turn or
// a timeline entry of its own, so the two modes cannot record a turn
// differently.
package turnrec

import (
	"context"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tracing"
	"github.com/turnstile-gw/turnstile/transport"
)

// Sink is the session's record of its turns.
type Sink interface {
	// TurnEnded writes a finished turn's timeline entry and stores it with
	// its entries, off the caller's path. It is called once per turn,
	// after the turn's policy and trace have ended.
	TurnEnded(e End)
}

// Deps are what every turn of one session begins with.
type Deps struct {
	// Conversation is the session's policy; each turn is one of its turns.
	Conversation *orchestrator.Conversation
	// Tracing makes each turn's trace, linked to Link when it is valid;
	// nil: tracing is off.
	Tracing *tracing.Provider
	Link    trace.SpanContext
	Sink    Sink
}

// Turn is one running turn.
type Turn struct {
	N    int
	Mode protocol.Mode
	// Ctx carries the turn's root span (with tracing off, it is the context
	// Begin was given): the turn's tool rounds run, and its log lines are
	// written, with it.
	Ctx  context.Context
	Span trace.Span
	// Policy is the orchestrator's turn: its gates, calls and intents.
	Policy *orchestrator.Turn

	sink  Sink
	ended atomic.Bool
}

// Begin begins turn n of the session in mode: its trace and its policy
// turn. ctx is what the turn runs under (its end cancels the turn's calls).
func Begin(ctx context.Context, d Deps, n int, mode protocol.Mode) *Turn {
	s := d.Conversation.Session()
	ctx, span := d.Tracing.StartTurn(ctx, tracing.Turn{Session: s.ID, User: s.UserID, N: n, Mode: string(mode),
		Link: d.Link})
	return &Turn{N: n, Mode: mode, Ctx: ctx, Span: span, Policy: d.Conversation.Turn(n, mode), sink: d.Sink}
}

// End is how a turn ended, and what of it the session has not recorded
// yet.
type End struct {
	// N and Mode are the turn's (Turn.End sets them).
	N    int
	Mode protocol.Mode
	// Reason is the turn.done reason.
	Reason protocol.TurnEnd
	// Input and Answer are what the user said and what the model answered,
	// when they are known only now (voice transcripts, a terminal tool's
	// text); "" keeps what the timeline noted during the turn.
	Input, Answer string
	// Entries are the turn's history entries not stored yet (a voice turn's
	// transcripts); a text turn commits its entries as it goes.
	Entries []transport.Entry
	// Handle is a voice turn's newest Live resumption handle.
	Handle string
	// VoiceResponse is a voice turn's voice-to-voice latency (the end of the
	// user's speech to the first answer audio sent); 0 when unknown.
	VoiceResponse time.Duration
}

// End ends the turn, the one end of every turn: the policy turn records it
// (every call not finished is cancelled; metrics, log), the trace gets the
// turn's messages (when content is captured) and its end reason and ends —
// before the browser can learn of the end, so that a client that saw
// turn.done finds the whole trace in the exporter's queue — and the Sink
// writes the timeline entry and the store. Only the first End does
// anything; it reports whether this call was it.
func (t *Turn) End(e End) bool {
	if !t.ended.CompareAndSwap(false, true) {
		t.Policy.CancelAll()
		return false
	}
	t.Policy.End(t.Ctx, e.Reason)
	if tracing.Capturing(t.Ctx) {
		if e.Input != "" {
			t.Span.SetAttributes(tracing.Messages("user", e.Input))
		}
		if e.Answer != "" {
			t.Span.SetAttributes(tracing.Messages("assistant", e.Answer))
		}
	}
	tracing.EndTurn(t.Span, string(e.Reason))
	e.N, e.Mode = t.N, t.Mode
	t.sink.TurnEnded(e)
	return true
}

// Drop ends a turn that never was one (the session refused it after its
// model request had started): its trace shows it, with reason, and nothing
// else records it.
func (t *Turn) Drop(reason protocol.TurnEnd) {
	if !t.ended.CompareAndSwap(false, true) {
		return
	}
	t.Policy.CancelAll()
	tracing.EndTurn(t.Span, string(reason))
}
