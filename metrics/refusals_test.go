package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRefusalsStartAtZeroAndUnknownReasonsCountAsOther(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg, Build{Version: "test", Commit: "abc"})
	// One per reason and channel; the connection refusals (max_connections,
	// unauth_per_ip, unauth_share) have channel none only.
	if want := (len(RefusalReasons())-3)*len(Channels) + 3; testutil.CollectAndCount(m.Refusals) != want {
		t.Fatalf("%d series before any refusal, want one per reason and channel (%d)",
			testutil.CollectAndCount(m.Refusals), want)
	}
	m.Refusal(RefusedMaxSessions, ChannelTwilio)
	m.Refusal(RefusedMaxSessions, ChannelTwilio)
	m.Refusal("user-42", ChannelTwilio) // a caller's mistake must not create a series per value
	if got := testutil.ToFloat64(m.Refusals.WithLabelValues(string(RefusedMaxSessions), "twilio")); got != 2 {
		t.Errorf("max_sessions = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.Refusals.WithLabelValues("other", "twilio")); got != 1 {
		t.Errorf("other = %v, want 1", got)
	}
	if n, want := testutil.CollectAndCount(m.Refusals), (len(RefusalReasons())-3)*len(Channels)+3; n != want {
		t.Errorf("%d series after refusals, want still %d", n, want)
	}
	if problems, err := testutil.GatherAndLint(reg, "turnstile_refusals_total"); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}
