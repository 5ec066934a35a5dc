package metrics

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/protocol"
)

// DefaultSummaryWindow is how many recent results per tool the summary keeps.
const DefaultSummaryWindow = 1000

// maxSummaryTools bounds the number of tools the summary tracks, whatever
// names callers pass; further names are folded into OverflowTool.
const maxSummaryTools = 256

// OverflowTool is the summary entry that collects tools beyond the first
// maxSummaryTools distinct names.
const OverflowTool = "_overflow"

// Summary is a human-readable companion to the Prometheus collectors: per
// tool, exact percentiles over the last window results (where Prometheus only
// has buckets), plus context token estimates and the loop-detection state.
//
// Memory is bounded by window × tools (two int64 rings per tool, allocated at
// the tool's first call). All methods are safe for concurrent use.
type Summary struct {
	window int

	mu        sync.Mutex
	tools     map[string]*toolStats
	context   map[string]int
	loopState func() any

	// The context view: init estimates by mode, the configured budget, the
	// live sessions (set by New; nil for a summary on its own), and the
	// peak context and tool-call count of the last window ended sessions.
	init         map[string]InitContext
	budget       int
	live         *liveSessions
	ended        uint64
	sessionPeaks ring
	sessionCalls ring
}

type toolStats struct {
	calls    uint64
	outcomes map[string]uint64
	chars    ring // result sizes, characters
	latency  ring // durations, nanoseconds
}

// NewSummary returns an empty summary keeping the last window results per
// tool; window <= 0 means DefaultSummaryWindow.
func NewSummary(window int) *Summary {
	if window <= 0 {
		window = DefaultSummaryWindow
	}
	return &Summary{window: window, tools: map[string]*toolStats{}, context: map[string]int{},
		init: map[string]InitContext{}, sessionPeaks: newRing(window), sessionCalls: newRing(window)}
}

func (s *Summary) setInitContext(mode string, system, tools int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init[mode] = InitContext{SystemPromptTokens: system, ToolDeclarationTokens: tools, TotalTokens: system + tools}
}

// initContextOf is the split set for mode, or only its total when the
// split was never given.
func (s *Summary) initContextOf(mode string) InitContext {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ic, ok := s.init[mode]; ok && ic.TotalTokens == s.context[mode] {
		return ic
	}
	return InitContext{TotalTokens: s.context[mode]}
}

func (s *Summary) setContextBudget(tokens int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.budget = tokens
}

func (s *Summary) observeSessionEnd(peak, calls int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended++
	s.sessionPeaks.add(int64(peak))
	s.sessionCalls.add(int64(calls))
}

// ObserveTool records one finished tool call. outcome is "ok" or the
// lower-case error type. resultChars is the result's size in characters; a
// negative one means the size is unknown: the call and its latency are
// recorded, its size is not.
func (s *Summary) ObserveTool(tool string, d time.Duration, resultChars int, outcome string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts, ok := s.tools[tool]
	if !ok {
		if len(s.tools) >= maxSummaryTools {
			tool = OverflowTool
			ts = s.tools[tool]
		}
		if ts == nil {
			ts = &toolStats{
				outcomes: map[string]uint64{},
				chars:    newRing(s.window),
				latency:  newRing(s.window),
			}
			s.tools[tool] = ts
		}
	}
	ts.calls++
	ts.outcomes[outcome]++
	ts.latency.add(int64(d))
	if resultChars >= 0 {
		ts.chars.add(int64(resultChars))
	}
}

// SizeP95 is the nearest-rank p95 of a tool's last Window result sizes (in
// characters), 0
// when it has none. It sorts a copy of the window: call it when a result
// could have moved the p95 over a line, not for every result.
func (s *Summary) SizeP95(tool string) int64 {
	s.mu.Lock()
	ts, ok := s.tools[tool]
	var sizes []int64
	if ok {
		sizes = ts.chars.values()
	}
	s.mu.Unlock()
	slices.Sort(sizes)
	return nearestRank(sizes, 95)
}

// SetContextTokens records the current context size estimate (chars/4) for
// a mode ("text", "voice").
func (s *Summary) SetContextTokens(mode string, tokens int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.context[mode] = tokens
}

// SetLoopState installs the provider of the loop-detection state. It is
// called on every Snapshot, outside the summary's lock, so it may take its
// own locks; its value must be JSON-encodable. nil removes it.
func (s *Summary) SetLoopState(provider func() any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loopState = provider
}

// SummaryView is the JSON document served at /metrics/summary. The spec's
// figures are ResponseSizes, ResponseTokens, Context and LoopDetection;
// Tools holds each tool's whole line, and ContextTokens and LoopState are
// the earlier names of the init totals and the loop state, kept for
// readers of the first version.
type SummaryView struct {
	GeneratedAt   time.Time           `json:"generated_at"`
	Window        int                 `json:"window"`
	Tools         map[string]ToolView `json:"tools"`
	ContextTokens map[string]int      `json:"context_tokens"`
	LoopState     any                 `json:"loop_state"`

	// ResultSizeWarnChars is the size in characters a tool's p95 result
	// should stay under; ResponseSizes flags the tools above it.
	ResultSizeWarnChars int                      `json:"resultSizeWarnChars"`
	ResponseSizes       map[string]ResponseSizes `json:"responseSizes"`
	ResponseTokens      map[string]TokenStats    `json:"responseTokens"`
	Context             ContextView              `json:"context"`
	LoopDetection       any                      `json:"loopDetection"`
}

// ResponseSizes are a tool's result sizes in characters (Unicode code
// points of the response's JSON) over its last Window results with a known
// size.
type ResponseSizes struct {
	Samples int     `json:"samples"`
	P50     float64 `json:"p50"`
	P95     float64 `json:"p95"`
	P99     float64 `json:"p99"`
	// OverWarning is true when P95 is above ResultSizeWarnChars.
	OverWarning bool `json:"overWarning"`
}

// ContextView is the context part of the summary: what every session
// starts with, per mode; the configured budget; the live sessions' largest
// current estimate; and, over the last Window ended sessions, their peak
// context and their tool-call counts (nearest-rank percentiles).
type ContextView struct {
	// SessionInitTokens, SystemPromptTokens and ToolDeclTokens are the
	// seed's figures: the session-init estimate of the mode sessions start
	// in by default (text; voice when only voice has one), its system
	// prompt and its tool declarations. Init has every mode's.
	SessionInitTokens   int                    `json:"sessionInitTokens"`
	SystemPromptTokens  int                    `json:"systemPromptTokens"`
	ToolDeclTokens      int                    `json:"toolDeclTokens"`
	Init                map[string]InitContext `json:"init"`
	BudgetTokens        int                    `json:"budgetTokens"`
	LiveSessions        int                    `json:"liveSessions"`
	LargestLiveTokens   int                    `json:"largestLiveTokens"`
	EndedSessions       uint64                 `json:"endedSessions"`
	SessionSamples      int                    `json:"sessionSamples"`
	PeakTokens          Percentiles            `json:"peakTokens"`
	ToolCallsPerSession Percentiles            `json:"toolCallsPerSession"`
}

// ToolView is one tool's line in the summary. Calls and Outcomes count every
// call since start; the percentiles cover the last Window results only.
type ToolView struct {
	Calls    uint64            `json:"calls"`
	Outcomes map[string]uint64 `json:"outcomes"`
	// SizeSamples is how many results the size and token figures cover
	// (those with a known size); LatencySamples how many calls the latency
	// figures cover. Both are at most Window.
	SizeSamples    int         `json:"size_samples"`
	ResultChars    Percentiles `json:"result_chars"`
	ResultTokens   TokenStats  `json:"result_tokens"`
	LatencySamples int         `json:"latency_samples"`
	LatencyMs      Percentiles `json:"latency_ms"`
}

// Percentiles are nearest-rank percentiles: for p and n sorted values, the
// value at rank ceil(p/100 × n), so every figure is an observed value. They
// are 0 when there is no value.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
}

// TokenStats estimates tokens as ceil(chars/4) per result (EstimateTokens).
type TokenStats struct {
	Avg float64 `json:"avg"`
	P95 int64   `json:"p95"`
}

// Snapshot computes the view. It copies the rings under the lock and sorts
// the copies outside it, so observers wait for copies, not for sorting.
func (s *Summary) Snapshot() SummaryView {
	type copied struct {
		calls    uint64
		outcomes map[string]uint64
		chars    []int64
		latency  []int64
	}
	s.mu.Lock()
	raw := make(map[string]copied, len(s.tools))
	for name, ts := range s.tools {
		raw[name] = copied{
			calls:    ts.calls,
			outcomes: maps.Clone(ts.outcomes),
			chars:    ts.chars.values(),
			latency:  ts.latency.values(),
		}
	}
	context := maps.Clone(s.context)
	provider := s.loopState
	cv := ContextView{Init: maps.Clone(s.init), BudgetTokens: s.budget, EndedSessions: s.ended}
	peaks, calls := s.sessionPeaks.values(), s.sessionCalls.values()
	live := s.live
	s.mu.Unlock()

	if live != nil {
		cv.LiveSessions, cv.LargestLiveTokens = live.stats()
	}
	for mode, total := range context {
		if ic, ok := cv.Init[mode]; !ok || ic.TotalTokens != total {
			cv.Init[mode] = InitContext{TotalTokens: total}
		}
	}
	for _, mode := range protocol.Modes {
		if ic, ok := cv.Init[string(mode)]; ok {
			cv.SessionInitTokens, cv.SystemPromptTokens, cv.ToolDeclTokens =
				ic.TotalTokens, ic.SystemPromptTokens, ic.ToolDeclarationTokens
			break
		}
	}
	slices.Sort(peaks)
	slices.Sort(calls)
	cv.SessionSamples = len(peaks)
	cv.PeakTokens = percentiles(peaks, 1)
	cv.ToolCallsPerSession = percentiles(calls, 1)
	v := SummaryView{
		GeneratedAt:         clock.Wall.Now().UTC(),
		Window:              s.window,
		Tools:               make(map[string]ToolView, len(raw)),
		ContextTokens:       context,
		ResultSizeWarnChars: ResultSizeWarnChars,
		ResponseSizes:       make(map[string]ResponseSizes, len(raw)),
		ResponseTokens:      make(map[string]TokenStats, len(raw)),
		Context:             cv,
	}
	for name, c := range raw {
		slices.Sort(c.chars)
		slices.Sort(c.latency)
		tokens := make([]int64, len(c.chars))
		var sum int64
		for i, n := range c.chars {
			tokens[i] = int64(EstimateTokens(int(n))) // still sorted: the estimate keeps the order
			sum += tokens[i]
		}
		tv := ToolView{
			Calls:          c.calls,
			Outcomes:       c.outcomes,
			SizeSamples:    len(c.chars),
			LatencySamples: len(c.latency),
			ResultChars: Percentiles{
				P50: float64(nearestRank(c.chars, 50)),
				P95: float64(nearestRank(c.chars, 95)),
				P99: float64(nearestRank(c.chars, 99)),
			},
			ResultTokens: TokenStats{P95: nearestRank(tokens, 95)},
			LatencyMs: Percentiles{
				P50: nsToMs(nearestRank(c.latency, 50)),
				P95: nsToMs(nearestRank(c.latency, 95)),
				P99: nsToMs(nearestRank(c.latency, 99)),
			},
		}
		if len(tokens) > 0 {
			tv.ResultTokens.Avg = float64(sum) / float64(len(tokens))
		}
		v.Tools[name] = tv
		v.ResponseSizes[name] = ResponseSizes{Samples: tv.SizeSamples, P50: tv.ResultChars.P50,
			P95: tv.ResultChars.P95, P99: tv.ResultChars.P99, OverWarning: tv.ResultChars.P95 > ResultSizeWarnChars}
		v.ResponseTokens[name] = tv.ResultTokens
	}
	if provider != nil {
		v.LoopState = provider()
		v.LoopDetection = v.LoopState
	}
	return v
}

// percentiles are the nearest-rank p50, p95 and p99 of sorted, each
// divided by unit.
func percentiles(sorted []int64, unit float64) Percentiles {
	return Percentiles{
		P50: float64(nearestRank(sorted, 50)) / unit,
		P95: float64(nearestRank(sorted, 95)) / unit,
		P99: float64(nearestRank(sorted, 99)) / unit,
	}
}

// nearestRank returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method, or 0 for an empty slice.
func nearestRank(sorted []int64, p int) int64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := (p*n + 99) / 100 // ceil(p×n/100) in integers
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

func nsToMs(ns int64) float64 { return float64(ns) / float64(time.Millisecond) }

// ring keeps the last cap(buf) values.
type ring struct {
	buf  []int64
	next int // where the next value goes once buf is full
}

func newRing(window int) ring { return ring{buf: make([]int64, 0, window)} }

func (r *ring) add(v int64) {
	if len(r.buf) < cap(r.buf) {
		r.buf = append(r.buf, v)
		return
	}
	r.buf[r.next] = v
	r.next = (r.next + 1) % len(r.buf)
}

// values returns a copy in no particular order.
func (r *ring) values() []int64 { return slices.Clone(r.buf) }
