package session

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-gw/turnstile/metrics"
)

// limitedConn is a connection with only what the reader's limits use.
func limitedConn(cfg Config) *conn {
	cfg.defaults()
	m := &Manager{cfg: cfg, Deps: Deps{Metrics: metrics.New(prometheus.NewRegistry(), metrics.Build{}),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	c := &conn{m: m, q: newQueue(1 << 20), rates: newRates(cfg),
		refusals: refusals{counters: newLimitCounters(m.Metrics, metrics.ChannelBrowser), node: &m.limitLogs}}
	c.logp.Store(m.Log)
	return c
}

// The audio path stays allocation-free with pacing on: a frame let through
// allocates nothing, and neither does a dropped one (but for the
// rate_limited notice, at most once a second).
func TestMicPacingAllocatesNothingPerFrame(t *testing.T) {
	c := limitedConn(Config{Limits: Limits{MicPace: 1.25}})
	now := time.Now()
	if a := testing.AllocsPerRun(1000, func() {
		now = now.Add(40 * time.Millisecond) // real time: every frame passes
		if !c.allowMic(now, 1280) {
			t.Fatal("a frame at real time was dropped")
		}
	}); a != 0 {
		t.Fatalf("%v allocations per frame let through", a)
	}
	dropped := 0
	if a := testing.AllocsPerRun(5000, func() {
		now = now.Add(time.Millisecond) // 40× real time
		if !c.allowMic(now, 1280) {
			dropped++
		}
	}); a > 0.01 {
		t.Fatalf("%v allocations per frame over the pace", a)
	}
	if dropped == 0 {
		t.Fatal("nothing dropped at 40× real time")
	}
}

func BenchmarkMicPacing(b *testing.B) {
	c := limitedConn(Config{Limits: Limits{MicPace: 1.25}})
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(40 * time.Millisecond)
		c.allowMic(now, 1280)
	}
}
