package main

import (
	"slices"
	"time"
)

// percentile is the nearest-rank p-th percentile (0 < p <= 100) of sorted
// durations: the smallest value with at least p % of the values at or below
// it. Zero for no values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*p/100 + 0.999999999) // ceil without float noise
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// Latency summarises round-trip latencies, in milliseconds.
type Latency struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50Ms"`
	P90   float64 `json:"p90Ms"`
	P99   float64 `json:"p99Ms"`
	Max   float64 `json:"maxMs"`
}

func summarize(ds []time.Duration) Latency {
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	l := Latency{Count: len(sorted)}
	if len(sorted) == 0 {
		return l
	}
	l.P50, l.P90, l.P99 = ms(percentile(sorted, 50)), ms(percentile(sorted, 90)), ms(percentile(sorted, 99))
	l.Max = ms(sorted[len(sorted)-1])
	return l
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
