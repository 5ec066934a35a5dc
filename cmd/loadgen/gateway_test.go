package main

import (
	"testing"
	"time"
)

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
