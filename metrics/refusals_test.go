package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRefusalsStartAtZeroAndUnknownReasonsCountAsOther(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg, Build{Version: "test", Commit: "abc"})
	if n := testutil.CollectAndCount(m.Refusals); n != len(RefusalReasons()) {
		t.Fatalf("%d series before any refusal, want one per reason (%d)", n, len(RefusalReasons()))
	}
	m.Refusal(RefusedMaxSessions)
	m.Refusal(RefusedMaxSessions)
	m.Refusal("user-42") // a caller's mistake must not create a series per value
	if got := testutil.ToFloat64(m.Refusals.WithLabelValues(RefusedMaxSessions)); got != 2 {
		t.Errorf("max_sessions = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.Refusals.WithLabelValues("other")); got != 1 {
		t.Errorf("other = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(m.Refusals); n != len(RefusalReasons()) {
		t.Errorf("%d series after refusals, want still %d", n, len(RefusalReasons()))
	}
	if problems, err := testutil.GatherAndLint(reg, "turnstile_refusals_total"); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}
