package main

import (
	"strings"
	"testing"
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
