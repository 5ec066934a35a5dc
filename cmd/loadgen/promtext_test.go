package main

import (
	"strings"
	"testing"
	"time"
)

const exposition = `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 422
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.34
process_resident_memory_bytes 6.1833216e+07
go_info{version="go1.26.8"} 1
turnstile_sessions_active{mode="text"} 3
turnstile_sessions_active{mode="voice"} 47
turnstile_sessions_active_total_other 99
weird{a="x } y",b="say \"hi\" {"} 2 1700000000000
turnstile_turn_duration_seconds_bucket{kind="voice",le="+Inf"} 5

`

func TestParsePromTextReadsProcessFigures(t *testing.T) {
	m, err := parsePromText(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{
		metricGoroutines: 422, metricCPU: 12.34, metricRSS: 61833216,
		`weird{a="x } y",b="say \"hi\" {"}`:                              2,
		`turnstile_turn_duration_seconds_bucket{kind="voice",le="+Inf"}`: 5,
	} {
		if got, ok := m[name]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	// The labelled series add up; a longer metric name is not one of them.
	if got := m.sum(metricSessions); got != 50 {
		t.Errorf("sum(%s) = %v, want 50", metricSessions, got)
	}
}

func TestParsePromTextRefusesGarbage(t *testing.T) {
	for _, in := range []string{
		"go_goroutines\n",
		"go_goroutines many\n",
		`go_info{version="go1.26" 1` + "\n",
		"go_goroutines 1 2 3\n",
	} {
		if _, err := parsePromText(strings.NewReader(in)); err == nil {
			t.Errorf("parsePromText(%q) accepted it", in)
		}
	}
}

func TestGatewayFiguresPerSession(t *testing.T) {
	const mib = 1 << 20
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	reading := func(cpu, rssMiB, gor float64) series {
		return series{metricCPU: cpu, metricRSS: rssMiB * mib, metricGoroutines: gor,
			`turnstile_sessions_active{mode="voice"}`: 50}
	}
	idle := reading(1, 30, 20)
	samples := []sample{
		{at: at(1), m: reading(1.1, 40, 200), streaming: 25}, // ramping: outside the window
		{at: at(10), m: reading(2, 80, 420), streaming: 50},
		{at: at(12), m: reading(3, 82, 420), streaming: 50},
		{at: at(14), m: reading(4, 84, 420), streaming: 50},
	}
	g := gatewayFigures(idle, samples, reading(4.1, 70, 21), at(10))
	want := GatewayFigures{
		WindowSeconds: 4, SessionsInWindow: 50, ActiveSessions: 50,
		CPUCores: 0.5, RSSIdleMiB: 30, RSSSteadyMiB: 82, RSSPeakMiB: 84, RSSAfterMiB: 70, RSSGrowthMiBPerMin: 60,
		GoroutinesIdle: 20, GoroutinesSteady: 420, GoroutinesPeak: 420, GoroutinesAfter: 21,
		MillicoresPerSession: 10, RSSMiBPerSession: 52.0 / 50, GoroutinesPerSession: 8, SessionsPerCore: 100,
		Scrapes: 4,
	}
	if *g != want {
		t.Errorf("gatewayFigures =\n%+v\nwant\n%+v", *g, want)
	}
}

func TestSteadyWindowFallsBackOnShortRuns(t *testing.T) {
	t0 := time.Unix(1000, 0)
	samples := []sample{
		{at: t0, streaming: 0},
		{at: t0.Add(time.Second), streaming: 2},
		{at: t0.Add(2 * time.Second), streaming: 2},
	}
	// Nothing after "from": every sample taken while sessions streamed.
	if got := steadyWindow(samples, t0.Add(time.Hour)); len(got) != 2 || !got[0].at.Equal(t0.Add(time.Second)) {
		t.Errorf("steadyWindow = %v, want the two streaming samples", got)
	}
	if got := steadyWindow(samples[:1], t0); len(got) != 1 {
		t.Errorf("steadyWindow of one idle sample = %v", got)
	}
}
