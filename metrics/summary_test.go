package metrics

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

func TestSummaryPercentilesAreNearestRank(t *testing.T) {
	cases := []struct {
		name          string
		values        []int // result chars; latency is the same number of ms
		p50, p95, p99 float64
		tokAvg        float64
		tokP95        int64
	}{
		{name: "one value", values: []int{400}, p50: 400, p95: 400, p99: 400, tokAvg: 100, tokP95: 100},
		{name: "four values", values: []int{40, 10, 30, 20}, p50: 20, p95: 40, p99: 40, tokAvg: 6.5, tokP95: 10},
		{name: "1..100", values: seq(1, 100), p50: 50, p95: 95, p99: 99, tokAvg: 13, tokP95: 24},
		{name: "1..1000", values: seq(1, 1000), p50: 500, p95: 950, p99: 990, tokAvg: 125.5, tokP95: 238},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewSummary(1000)
			vals := append([]int(nil), c.values...)
			rand.Shuffle(len(vals), func(i, j int) { vals[i], vals[j] = vals[j], vals[i] })
			for _, v := range vals {
				s.ObserveTool("kb_search", time.Duration(v)*time.Millisecond, v, "ok")
			}
			tv := s.Snapshot().Tools["kb_search"]
			want := Percentiles{P50: c.p50, P95: c.p95, P99: c.p99}
			if tv.ResultChars != want {
				t.Errorf("result chars = %+v, want %+v", tv.ResultChars, want)
			}
			if tv.LatencyMs != want {
				t.Errorf("latency ms = %+v, want %+v", tv.LatencyMs, want)
			}
			if tv.ResultTokens.P95 != c.tokP95 || !near(tv.ResultTokens.Avg, c.tokAvg) {
				t.Errorf("tokens = %+v, want avg %v p95 %d", tv.ResultTokens, c.tokAvg, c.tokP95)
			}
			if tv.Calls != uint64(len(c.values)) || tv.SizeSamples != len(c.values) {
				t.Errorf("calls %d samples %d, want %d", tv.Calls, tv.SizeSamples, len(c.values))
			}
		})
	}
}

func TestSummaryWindowEvictsOldestResult(t *testing.T) {
	s := NewSummary(1000)
	for i := 1; i <= 1000; i++ {
		s.ObserveTool("kb_get", time.Duration(i)*time.Millisecond, i, "ok")
	}
	before := s.Snapshot().Tools["kb_get"]
	if before.ResultChars.P50 != 500 || before.LatencyMs.P50 != 500 {
		t.Fatalf("p50 before eviction = %v chars, %v ms; want 500", before.ResultChars.P50, before.LatencyMs.P50)
	}

	// The 1001st result pushes out the 1st (1 char, 1 ms): every rank moves up by one.
	s.ObserveTool("kb_get", 1001*time.Millisecond, 1001, "ok")
	after := s.Snapshot().Tools["kb_get"]
	want := Percentiles{P50: 501, P95: 951, P99: 991}
	if after.ResultChars != want || after.LatencyMs != want {
		t.Errorf("after eviction: chars %+v, latency %+v; want %+v", after.ResultChars, after.LatencyMs, want)
	}
	if after.Calls != 1001 || after.SizeSamples != 1000 || after.LatencySamples != 1000 {
		t.Errorf("calls %d size samples %d latency samples %d; want 1001, 1000, 1000",
			after.Calls, after.SizeSamples, after.LatencySamples)
	}
}

func TestSummaryRingWrapsManyTimes(t *testing.T) {
	s := NewSummary(3)
	for i := 1; i <= 10; i++ {
		s.ObserveTool("t", time.Duration(i)*time.Millisecond, i*100, "ok")
	}
	tv := s.Snapshot().Tools["t"]
	// Only 8, 9, 10 remain.
	if want := (Percentiles{P50: 900, P95: 1000, P99: 1000}); tv.ResultChars != want {
		t.Errorf("chars = %+v, want %+v", tv.ResultChars, want)
	}
	if want := (Percentiles{P50: 9, P95: 10, P99: 10}); tv.LatencyMs != want {
		t.Errorf("latency = %+v, want %+v", tv.LatencyMs, want)
	}
	if !near(tv.ResultTokens.Avg, 225) || tv.ResultTokens.P95 != 250 {
		t.Errorf("tokens = %+v, want avg 225 p95 250", tv.ResultTokens)
	}
}

func TestSummaryCountsOutcomesAndUnknownSizes(t *testing.T) {
	s := NewSummary(10)
	s.ObserveTool("kb_search", time.Millisecond, 100, "ok")
	s.ObserveTool("kb_search", 5*time.Second, -1, "timeout")
	s.ObserveTool("kb_search", time.Millisecond, 40, "validation")
	tv := s.Snapshot().Tools["kb_search"]
	if want := map[string]uint64{"ok": 1, "timeout": 1, "validation": 1}; fmt.Sprint(tv.Outcomes) != fmt.Sprint(want) {
		t.Errorf("outcomes = %v, want %v", tv.Outcomes, want)
	}
	if tv.SizeSamples != 2 || tv.LatencySamples != 3 || tv.LatencyMs.P99 != 5000 {
		t.Errorf("size samples %d latency samples %d latency %+v", tv.SizeSamples, tv.LatencySamples, tv.LatencyMs)
	}
}

func TestSummaryBoundsTheNumberOfTools(t *testing.T) {
	s := NewSummary(5)
	for i := range maxSummaryTools + 44 {
		s.ObserveTool(fmt.Sprintf("tool_%d", i), time.Millisecond, 10, "ok")
	}
	v := s.Snapshot()
	if len(v.Tools) != maxSummaryTools+1 {
		t.Fatalf("%d tools tracked, want %d plus %s", len(v.Tools), maxSummaryTools, OverflowTool)
	}
	if got := v.Tools[OverflowTool].Calls; got != 44 {
		t.Errorf("%s calls = %d, want 44", OverflowTool, got)
	}
	// A tool seen before the bound keeps its own line.
	s.ObserveTool("tool_0", time.Millisecond, 10, "ok")
	if got := s.Snapshot().Tools["tool_0"].Calls; got != 2 {
		t.Errorf("tool_0 calls = %d, want 2", got)
	}
}

func TestSummaryEmptyRendersValidJSON(t *testing.T) {
	b, err := json.Marshal(NewSummary(0).Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	for key, want := range map[string]string{
		"window": "1000", "tools": "{}", "context_tokens": "{}", "loop_state": "null",
	} {
		if string(got[key]) != want {
			t.Errorf("%s = %s, want %s (document %s)", key, got[key], want, b)
		}
	}
	var at time.Time
	if err := json.Unmarshal(got["generated_at"], &at); err != nil || time.Since(at) > time.Minute {
		t.Errorf("generated_at = %s (%v)", got["generated_at"], err)
	}
}

func TestSummaryLoopStateIsReadAtRenderTime(t *testing.T) {
	s := NewSummary(10)
	var mu sync.Mutex
	active := 0
	s.SetLoopState(func() any {
		mu.Lock()
		defer mu.Unlock()
		// Calling back into the summary proves the provider runs outside its lock.
		s.SetContextTokens("text", active)
		return map[string]int{"sessions_flagged": active}
	})
	for want := range 3 {
		mu.Lock()
		active = want
		mu.Unlock()
		if got := s.Snapshot().LoopState.(map[string]int)["sessions_flagged"]; got != want {
			t.Errorf("loop state = %d, want %d", got, want)
		}
	}
	s.SetLoopState(nil)
	if got := s.Snapshot().LoopState; got != nil {
		t.Errorf("loop state after removal = %v, want nil", got)
	}
}

func TestSummaryIsSafeForConcurrentUse(t *testing.T) {
	const workers, perWorker, window = 8, 300, 100
	s := NewSummary(window)
	s.SetLoopState(func() any { return "ok" })
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				s.ObserveTool(fmt.Sprintf("tool_%d", i%3), time.Duration(i)*time.Microsecond, i, "ok")
				if i%50 == 0 {
					s.SetContextTokens("text", w*i)
					if _, err := json.Marshal(s.Snapshot()); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	var calls uint64
	for name, tv := range s.Snapshot().Tools {
		calls += tv.Calls
		if tv.SizeSamples != window || tv.LatencySamples != window {
			t.Errorf("%s: samples %d/%d, want %d", name, tv.SizeSamples, tv.LatencySamples, window)
		}
	}
	if calls != workers*perWorker {
		t.Errorf("calls = %d, want %d", calls, workers*perWorker)
	}
}

func seq(from, to int) []int {
	out := make([]int, 0, to-from+1)
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
