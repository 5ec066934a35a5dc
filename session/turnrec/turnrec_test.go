package turnrec_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/session/turnrec"
	"github.com/turnstile-gw/turnstile/tools"
)

// sink records the turns the session was told about.
type sink struct{ ended []turnrec.End }

func (s *sink) TurnEnded(e turnrec.End) { s.ended = append(s.ended, e) }

func begin(t *testing.T, mode protocol.Mode, n int) (*turnrec.Turn, *sink, *metrics.Metrics) {
	t.Helper()
	reg, err := tools.Combine(nil)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(prometheus.NewRegistry(), metrics.Build{Version: "test"})
	conv := orchestrator.New(reg, m, slog.New(slog.DiscardHandler)).Open(orchestrator.Session{ID: "s1", UserID: "u1"})
	s := &sink{}
	return turnrec.Begin(context.Background(), turnrec.Deps{Conversation: conv, Sink: s}, n, mode), s, m
}

// A turn of either mode ends once: the policy counts it in its mode and the
// session is told its number, mode, reason and what it learnt at the end;
// a second End (a voice turn failed after it completed) records nothing.
func TestTurnEndsOnceAndTheSessionIsToldInEitherMode(t *testing.T) {
	for _, mode := range protocol.Modes {
		t.Run(string(mode), func(t *testing.T) {
			tr, s, m := begin(t, mode, 4)
			if tr.Policy.Number() != 4 || tr.Ctx == nil || tr.Span == nil {
				t.Fatalf("turn %d, ctx %v, span %v: want turn 4 with its context and span", tr.Policy.Number(), tr.Ctx, tr.Span)
			}
			if !tr.End(turnrec.End{Reason: protocol.ReasonEndTurn, Input: "hi", Answer: "hello"}) {
				t.Fatal("the first End did not end the turn")
			}
			if tr.End(turnrec.End{Reason: protocol.ReasonError}) {
				t.Fatal("a second End ended the turn again")
			}
			if len(s.ended) != 1 {
				t.Fatalf("the session was told of %d ends, want 1", len(s.ended))
			}
			if e := s.ended[0]; e.N != 4 || e.Mode != mode || e.Reason != protocol.ReasonEndTurn || e.Input != "hi" || e.Answer != "hello" {
				t.Errorf("the session was told %+v", e)
			}
			for _, r := range []protocol.TurnEnd{protocol.ReasonEndTurn, protocol.ReasonError} {
				want := 0.0
				if r == protocol.ReasonEndTurn {
					want = 1
				}
				if n := testutil.ToFloat64(m.Turns.WithLabelValues(string(mode), string(r), "browser")); n != want {
					t.Errorf("turns_total{%s,%s} = %v, want %v", mode, r, n, want)
				}
			}
		})
	}
}

// A turn the session refused after its model request started is dropped:
// neither counted nor told to the session, and a later End does nothing.
func TestDroppedTurnIsNeitherCountedNorRecorded(t *testing.T) {
	tr, s, m := begin(t, protocol.ModeText, 1)
	tr.Drop("not_admitted")
	if tr.End(turnrec.End{Reason: protocol.ReasonEndTurn}) {
		t.Error("End after Drop ended the turn")
	}
	if len(s.ended) != 0 {
		t.Errorf("the session was told of a dropped turn: %+v", s.ended)
	}
	if n := testutil.ToFloat64(m.Turns.WithLabelValues("text", "end_turn", "browser")); n != 0 {
		t.Errorf("turns_total{text,end_turn} = %v after a dropped turn, want 0", n)
	}
}
