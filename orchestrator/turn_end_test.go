package orchestrator_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
)

// A turn is recorded once, at its end, in text and in voice alike: counted
// by mode, reason and channel, its duration (from its start, on the
// orchestrator's clock) and its tool calls observed, its calls added to the
// session's figures, and one log line. A second End records nothing.
func TestTurnEndRecordsTheTurnOnceInEachMode(t *testing.T) {
	for _, mode := range []protocol.Mode{tools.ModeText, tools.ModeVoice} {
		t.Run(string(mode), func(t *testing.T) {
			f := newFixture(t)
			clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			o := f.with(orchestrator.Config{Now: clk.Now}, orchestrator.Deps{})
			stats := f.m.OpenSession()
			tr := o.NewTurn(orchestrator.Session{ID: "s", UserID: "u", Mode: mode, Channel: metrics.ChannelTwilio,
				Stats: stats}, 3, nil)
			handleOne(t, tr, call("c1", "noop", nil), nil)
			clk.Advance(2500 * time.Millisecond)

			if !tr.End(context.Background(), protocol.ReasonEndTurn) {
				t.Fatal("the first End did not record the turn")
			}
			clk.Advance(time.Minute)
			if tr.End(context.Background(), protocol.ReasonError) {
				t.Fatal("a second End recorded the turn again")
			}

			if got := testutil.ToFloat64(f.m.Turns.WithLabelValues(string(mode), string(protocol.ReasonEndTurn), "twilio")); got != 1 {
				t.Errorf("turns_total{%s,end_turn,twilio} = %v, want 1", mode, got)
			}
			if got := testutil.ToFloat64(f.m.Turns.WithLabelValues(string(mode), string(protocol.ReasonError), "twilio")); got != 0 {
				t.Errorf("turns_total{%s,error,twilio} = %v, want 0: the second End counted", mode, got)
			}
			for _, m := range protocol.Modes {
				want, wantSecs, wantCalls := uint64(0), 0.0, 0.0
				if m == mode {
					want, wantSecs, wantCalls = 1, 2.5, 1
				}
				count, sum := histogramOf(t, f, "turnstile_turn_duration_seconds", m)
				if count != want || sum != wantSecs {
					t.Errorf("turn_duration_seconds{mode=%s}: %d observations summing %v s, want %d summing %v",
						m, count, sum, want, wantSecs)
				}
				count, sum = histogramOf(t, f, "turnstile_tool_calls_per_turn", m)
				if count != want || sum != wantCalls {
					t.Errorf("tool_calls_per_turn{mode=%s}: %d observations summing %v, want %d summing %v",
						m, count, sum, want, wantCalls)
				}
			}
			stats.Close()
			if n, sum := testutil.CollectAndCount(f.m.CallsPerSession), sampleSum(t, f, "turnstile_tool_calls_per_session"); n != 1 || sum != 1 {
				t.Errorf("tool_calls_per_session: %d series summing %v, want the turn's one call", n, sum)
			}
			if !f.log.Contains("turn done") || !f.log.Contains("mode="+string(mode)) || !f.log.Contains("duration_ms=2500") {
				t.Errorf("no turn done line with the mode and the duration in the log:\n%s", f.log.String())
			}
		})
	}
}

// histogramOf is the sample count and sum of the named histogram's series
// of mode.
func histogramOf(t *testing.T, f *fixture, name string, mode protocol.Mode) (uint64, float64) {
	t.Helper()
	for _, m := range f.series(t, name) {
		if label(m, "mode") == string(mode) {
			return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
		}
	}
	return 0, 0
}

// sampleSum is the sample sum of an unlabelled histogram.
func sampleSum(t *testing.T, f *fixture, name string) float64 {
	t.Helper()
	for _, m := range f.series(t, name) {
		return m.GetHistogram().GetSampleSum()
	}
	return 0
}
