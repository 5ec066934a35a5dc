package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRefusalsStartAtZeroAndUnknownReasonsCountAsOther(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg, Build{Version: "test", Commit: "abc"})
	// One per reason and channel; max_connections, refused at accept, has
	// channel none only.
	if want := (len(RefusalReasons())-1)*len(Channels) + 1; testutil.CollectAndCount(m.Refusals) != want {
		t.Fatalf("%d series before any refusal, want one per reason and channel (%d)",
			testutil.CollectAndCount(m.Refusals), want)
	}
	m.Refusal(RefusedMaxSessions, ChannelTwilio)
	m.Refusal(RefusedMaxSessions, ChannelTwilio)
	m.Refusal("user-42", ChannelTwilio) // a caller's mistake must not create a series per value
	if got := testutil.ToFloat64(m.Refusals.WithLabelValues(RefusedMaxSessions, "twilio")); got != 2 {
		t.Errorf("max_sessions = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.Refusals.WithLabelValues("other", "twilio")); got != 1 {
		t.Errorf("other = %v, want 1", got)
	}
	if n, want := testutil.CollectAndCount(m.Refusals), (len(RefusalReasons())-1)*len(Channels)+1; n != want {
		t.Errorf("%d series after refusals, want still %d", n, want)
	}
	if problems, err := testutil.GatherAndLint(reg, "turnstile_refusals_total"); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}
