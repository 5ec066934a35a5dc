package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestObserveToolCallUpdatesPrometheusAndSummary(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, Build{})
	m.ObserveToolCall("kb_search", "ok", ChannelBrowser, 20*time.Millisecond, 4000)
	m.ObserveToolCall("kb_search", "timeout", ChannelBrowser, 2*time.Second, -1)

	if got := testutil.ToFloat64(m.ToolCalls.WithLabelValues("kb_search", "ok", "browser")); got != 1 {
		t.Errorf("tool_calls_total{ok} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.ToolCalls.WithLabelValues("kb_search", "timeout", "browser")); got != 1 {
		t.Errorf("tool_calls_total{timeout} = %v, want 1", got)
	}
	for name, want := range map[string]uint64{
		"turnstile_tool_duration_seconds": 2, // both calls have a latency
		"turnstile_tool_result_chars":     1, // the timeout has no known size
		"turnstile_tool_result_tokens":    1,
	} {
		if got, _ := histogramStats(t, reg, name); got != want {
			t.Errorf("%s sample count = %d, want %d", name, got, want)
		}
	}
	if _, got := histogramStats(t, reg, "turnstile_tool_result_tokens"); got != 1000 {
		t.Errorf("tool_result_tokens sum = %v, want 1000 (4000 chars / 4)", got)
	}

	v := m.Summary.Snapshot().Tools["kb_search"]
	if v.Calls != 2 || v.Outcomes["ok"] != 1 || v.Outcomes["timeout"] != 1 {
		t.Errorf("summary calls/outcomes = %d %v", v.Calls, v.Outcomes)
	}
	if v.SizeSamples != 1 || v.ResultChars.P99 != 4000 || v.ResultTokens.Avg != 1000 {
		t.Errorf("summary sizes = %+v samples %d tokens %+v", v.ResultChars, v.SizeSamples, v.ResultTokens)
	}
	if v.LatencySamples != 2 || v.LatencyMs.P99 != 2000 {
		t.Errorf("summary latency = %+v samples %d", v.LatencyMs, v.LatencySamples)
	}
}

func TestSetInitTokensFeedsGaugeAndSummary(t *testing.T) {
	m := New(prometheus.NewRegistry(), Build{})
	m.SetInitTokens("text", 1234)
	if got := testutil.ToFloat64(m.InitTokens.WithLabelValues("text")); got != 1234 {
		t.Errorf("init tokens gauge = %v", got)
	}
	if got := m.Summary.Snapshot().ContextTokens["text"]; got != 1234 {
		t.Errorf("summary context tokens = %d", got)
	}
}

// histogramStats sums the sample count and sum of every series of a
// histogram family.
func histogramStats(t *testing.T, g prometheus.Gatherer, name string) (count uint64, sum float64) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			count += m.GetHistogram().GetSampleCount()
			sum += m.GetHistogram().GetSampleSum()
		}
	}
	return count, sum
}

// Seed 004's estimate: ceil(chars / 4), so a short answer is never 0
// tokens.
func TestEstimateTokensRoundsUp(t *testing.T) {
	for n, want := range map[int]int{0: 0, 1: 1, 3: 1, 4: 1, 5: 2, 1500: 375, 1501: 376} {
		if got := EstimateTokens(n); got != want {
			t.Errorf("EstimateTokens(%d) = %d, want %d", n, got, want)
		}
	}
}
