package metrics

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func gaugeValue(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("%s not exposed", name)
	return 0
}

func TestSessionContextGaugeIsTheLargestLiveSession(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, Build{})
	a, b := m.OpenSession(), m.OpenSession()
	a.ObserveContext(1200)
	b.ObserveContext(5000)
	b.ObserveContext(3000) // the history was trimmed: the current estimate falls, the peak stays
	if got := gaugeValue(t, reg, "turnstile_session_context_tokens"); got != 3000 {
		t.Errorf("context gauge = %v, want the largest current estimate 3000", got)
	}
	b.AddToolCalls(3)
	b.AddToolCalls(2)
	b.Close()
	b.Close() // only the first counts
	if got := gaugeValue(t, reg, "turnstile_session_context_tokens"); got != 1200 {
		t.Errorf("context gauge after b ended = %v, want 1200", got)
	}
	if n, sum := histogramStats(t, reg, "turnstile_session_peak_context_tokens"); n != 1 || sum != 5000 {
		t.Errorf("peak context: %d samples sum %v, want one of 5000", n, sum)
	}
	if n, sum := histogramStats(t, reg, "turnstile_tool_calls_per_session"); n != 1 || sum != 5 {
		t.Errorf("tool calls per session: %d samples sum %v, want one of 5", n, sum)
	}
	a.Close()
	if got := gaugeValue(t, reg, "turnstile_session_context_tokens"); got != 0 {
		t.Errorf("context gauge with no live session = %v", got)
	}
	cv := m.Summary.Snapshot().Context
	if cv.EndedSessions != 2 || cv.SessionSamples != 2 || cv.PeakTokens.P99 != 5000 || cv.PeakTokens.P50 != 1200 ||
		cv.ToolCallsPerSession.P99 != 5 || cv.LiveSessions != 0 {
		t.Errorf("summary context = %+v", cv)
	}
}

func TestSessionStatsAreSafeForConcurrentUse(t *testing.T) {
	m := New(prometheus.NewRegistry(), Build{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			s := m.OpenSession()
			for i := range 200 {
				s.ObserveContext(w*1000 + i)
				s.AddToolCalls(1)
				if i%50 == 0 {
					_ = m.Summary.Snapshot()
				}
			}
			s.Close()
		})
	}
	wg.Wait()
	cv := m.Summary.Snapshot().Context
	if cv.EndedSessions != 8 || cv.PeakTokens.P99 != 7199 || cv.ToolCallsPerSession.P50 != 200 {
		t.Errorf("after 8 concurrent sessions: %+v", cv)
	}
}

func TestReadinessRefusalsAndBudgetGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, Build{})
	if got := testutil.ToFloat64(m.Ready); got != 0 {
		t.Errorf("ready before any check = %v, want 0", got)
	}
	m.SetReady(true)
	if got := testutil.ToFloat64(m.Ready); got != 1 {
		t.Errorf("ready = %v, want 1", got)
	}
	m.SetReady(false)
	if got := testutil.ToFloat64(m.Ready); got != 0 {
		t.Errorf("ready after a failed check = %v, want 0", got)
	}
	m.RefuseSession("max_sessions", ChannelBrowser)
	m.RefuseSession("a reason from a header", ChannelBrowser)
	if got := testutil.ToFloat64(m.SessionsRefused.WithLabelValues("max_sessions", "browser")); got != 1 {
		t.Errorf("refused{max_sessions} = %v", got)
	}
	if got := testutil.ToFloat64(m.SessionsRefused.WithLabelValues("other", "browser")); got != 1 {
		t.Errorf("refused{other} = %v: unknown reasons must fold into other", got)
	}
	if n, _ := testutil.GatherAndCount(reg, "turnstile_sessions_refused_total"); n != len(SessionRefusalReasons)*len(Channels) {
		t.Errorf("%d refusal series, want the closed set of %d × channel", n, len(SessionRefusalReasons))
	}
	m.SetContextBudget(32000)
	if got := testutil.ToFloat64(m.ContextBudget); got != 32000 || m.Summary.Snapshot().Context.BudgetTokens != 32000 {
		t.Errorf("budget = %v", got)
	}
}

func TestInitContextSplitsSystemPromptAndToolDeclarations(t *testing.T) {
	m := New(prometheus.NewRegistry(), Build{})
	m.SetInitContext("voice", 700, 300)
	if got := testutil.ToFloat64(m.InitTokens.WithLabelValues("voice")); got != 1000 {
		t.Errorf("total = %v", got)
	}
	if s, tl := testutil.ToFloat64(m.InitSystemTokens.WithLabelValues("voice")), testutil.ToFloat64(m.InitToolTokens.WithLabelValues("voice")); s != 700 || tl != 300 {
		t.Errorf("split = %v + %v", s, tl)
	}
	want := InitContext{SystemPromptTokens: 700, ToolDeclarationTokens: 300, TotalTokens: 1000}
	if got := m.InitContextOf("voice"); got != want {
		t.Errorf("InitContextOf = %+v", got)
	}
	// A total set alone (the session before it reports the split) shows as a total.
	m.SetInitTokens("text", 800)
	if got := m.InitContextOf("text"); got != (InitContext{TotalTokens: 800}) {
		t.Errorf("total only: %+v", got)
	}
	if got := m.Summary.Snapshot().Context.Init; got["voice"] != want || got["text"].TotalTokens != 800 {
		t.Errorf("summary init = %+v", got)
	}
}

func TestSummaryCarriesTheSpecFiguresUnderTheirNames(t *testing.T) {
	m := New(prometheus.NewRegistry(), Build{})
	m.Summary.SetLoopState(func() any { return map[string]int{"flagged": 1} })
	for i := range 20 {
		m.ObserveToolCall("big", "ok", ChannelBrowser, time.Millisecond, 1000+100*i) // p95 2800
		m.ObserveToolCall("small", "ok", ChannelBrowser, time.Millisecond, 200)
	}
	b, err := json.Marshal(m.Summary.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Warn           int                      `json:"resultSizeWarnChars"`
		ResponseSizes  map[string]ResponseSizes `json:"responseSizes"`
		ResponseTokens map[string]TokenStats    `json:"responseTokens"`
		Context        *ContextView             `json:"context"`
		LoopDetection  map[string]int           `json:"loopDetection"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Warn != 1500 || !doc.ResponseSizes["big"].OverWarning || doc.ResponseSizes["small"].OverWarning ||
		doc.ResponseSizes["big"].P95 != 2800 || doc.ResponseSizes["big"].Samples != 20 {
		t.Errorf("responseSizes = %+v (warn %d)", doc.ResponseSizes, doc.Warn)
	}
	if doc.ResponseTokens["small"].Avg != 50 || doc.ResponseTokens["big"].P95 != 700 {
		t.Errorf("responseTokens = %+v", doc.ResponseTokens)
	}
	if doc.Context == nil || doc.LoopDetection["flagged"] != 1 {
		t.Errorf("context %+v loopDetection %v: %s", doc.Context, doc.LoopDetection, b)
	}
}
