package metrics

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetricNamesPassLint(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg, Build{Version: "test", Commit: "abc"})
	// Touch every vector so that the linter sees a sample of each.
	m.SessionsActive.WithLabelValues("text").Inc()
	m.SessionsStarted.WithLabelValues("new").Inc()
	m.Turns.WithLabelValues("text", "end_turn").Inc()
	m.TurnDuration.WithLabelValues("text").Observe(1)
	m.ToolCalls.WithLabelValues("kb_search", "ok").Inc()
	m.ToolDuration.WithLabelValues("kb_search").Observe(0.01)
	m.ToolResultBytes.WithLabelValues("kb_search").Observe(100)
	m.ModelRequests.WithLabelValues("text", "ok").Inc()
	m.ModelFirstToken.WithLabelValues("text").Observe(0.1)
	m.BrowserMessages.WithLabelValues("text").Inc()
	m.BrowserDisconnect.WithLabelValues("client_closed").Inc()
	m.InitTokens.WithLabelValues("text").Set(100)
	m.ObserveRedis("append", time.Millisecond, errors.New("down"))

	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}
}

func TestBuildInfoExported(t *testing.T) {
	reg := prometheus.NewRegistry()
	New(reg, Build{Version: "1.2.3", Commit: "deadbeef"})
	n, err := testutil.GatherAndCount(reg, "turnstile_build_info")
	if err != nil || n != 1 {
		t.Fatalf("turnstile_build_info count = %d, %v", n, err)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "turnstile_build_info" {
			continue
		}
		var labels []string
		for _, l := range mf.GetMetric()[0].GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		got := strings.Join(labels, ",")
		if !strings.Contains(got, "version=1.2.3") || !strings.Contains(got, "commit=deadbeef") {
			t.Fatalf("build info labels = %s", got)
		}
	}
}

func TestRedisErrorsCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, Build{})
	m.ObserveRedis("append", time.Millisecond, nil)
	m.ObserveRedis("append", time.Millisecond, errors.New("x"))
	if got := testutil.ToFloat64(m.RedisErrors.WithLabelValues("append")); got != 1 {
		t.Fatalf("redis errors = %v, want 1", got)
	}
}
