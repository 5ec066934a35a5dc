package session

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/internal/throttle"
	"github.com/turnstile-gw/turnstile/metrics"
)

func TestRefusalsAreCountedEachAndLoggedOnceAMinuteWithTheCount(t *testing.T) {
	m := metrics.New(prometheus.NewRegistry(), metrics.Build{})
	r := refusals{counters: newLimitCounters(m, metrics.ChannelBrowser), node: &throttle.Keyed{}}
	var logged []int
	for s := range 130 { // one a second for 130 s
		if n, ok := r.note(limitMessageRate, t0.Add(time.Duration(s)*time.Second)); ok {
			logged = append(logged, n)
		}
	}
	if got := testutil.ToFloat64(r.counters[limitMessageRate]); got != 130 {
		t.Errorf("turnstile_refusals_total{reason=message_rate} = %v, want 130", got)
	}
	if len(logged) != 3 || logged[0] != 1 || logged[1] != 60 || logged[2] != 60 {
		t.Errorf("log lines with counts %v, want 1, 60, 60 (one a minute)", logged)
	}
	// Another limit has a log line of its own.
	if n, ok := r.note(limitAudioRate, t0.Add(130*time.Second)); !ok || n != 1 {
		t.Errorf("the first audio_rate refusal: logged %v (count %d), want logged", ok, n)
	}
}

func TestResumeRefusalsAreLoggedOnceAMinutePerNode(t *testing.T) {
	m := metrics.New(prometheus.NewRegistry(), metrics.Build{})
	node := &throttle.Keyed{}
	counters := newLimitCounters(m, metrics.ChannelBrowser)
	a, b := refusals{counters: counters, node: node}, refusals{counters: counters, node: node}
	if _, ok := a.note(limitResumes, t0); !ok {
		t.Fatal("the node's first resume refusal not logged")
	}
	if _, ok := b.note(limitResumes, t0.Add(time.Second)); ok {
		t.Error("a new connection's resume refusal logged again within the minute: a reconnect loop fills the log")
	}
	if n, ok := b.note(limitResumes, t0.Add(time.Minute)); !ok || n != 2 {
		t.Errorf("a minute later: logged %v with count %d, want logged with both refusals", ok, n)
	}
	if got := testutil.ToFloat64(counters[limitResumes]); got != 3 {
		t.Errorf("turnstile_refusals_total{reason=resumes_per_minute} = %v, want 3", got)
	}
	if a.logs.Load() != nil || b.logs.Load() != nil {
		t.Error("per-node refusals made the connections' own log throttles")
	}
}
