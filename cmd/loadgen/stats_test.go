package main

import (
	"slices"
	"testing"
	"time"
)

func TestPercentileIsNearestRank(t *testing.T) {
	var hundred []time.Duration
	for i := 1; i <= 100; i++ {
		hundred = append(hundred, time.Duration(i)*time.Millisecond)
	}
	ten := hundred[:10]
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"median of 1..100", hundred, 50, 50 * time.Millisecond},
		{"p90 of 1..100", hundred, 90, 90 * time.Millisecond},
		{"p99 of 1..100", hundred, 99, 99 * time.Millisecond},
		{"p100 is the max", hundred, 100, 100 * time.Millisecond},
		{"p99 of 10 values is the max", ten, 99, 10 * time.Millisecond},
		{"p90 of 10 values", ten, 90, 9 * time.Millisecond},
		{"p50 of 10 values", ten, 50, 5 * time.Millisecond},
		{"one value", hundred[:1], 50, time.Millisecond},
		{"no values", nil, 50, 0},
	} {
		if got := percentile(tc.sorted, tc.p); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSummarizeSortsACopy(t *testing.T) {
	in := []time.Duration{900 * time.Millisecond, 600 * time.Millisecond, 700 * time.Millisecond, 650 * time.Millisecond}
	orig := slices.Clone(in)
	got := summarize(in)
	want := Latency{Count: 4, P50: 650, P90: 900, P99: 900, Max: 900}
	if got != want {
		t.Errorf("summarize = %+v, want %+v", got, want)
	}
	if !slices.Equal(in, orig) {
		t.Errorf("summarize reordered its input: %v", in)
	}
	if got := summarize(nil); got != (Latency{}) {
		t.Errorf("summarize(nil) = %+v, want zero", got)
	}
}
