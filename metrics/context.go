package metrics

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/turnstile-gw/turnstile/protocol"
)

// ResultSizeWarnChars is the tool result size (after shaping, in
// characters of the response's JSON) above which a tool's results are too
// large for a model's context to carry comfortably: seed 004's "P95
// response size > 1500 chars". The alert on a tool's p95 result size, the
// p95 warning log and /metrics/summary's warning use it.
const ResultSizeWarnChars = 1500

// SetReady records the node's readiness as /readyz last computed it
// (turnstile_ready 1 or 0).
func (m *Metrics) SetReady(ready bool) {
	if ready {
		m.Ready.Set(1)
	} else {
		m.Ready.Set(0)
	}
}

// RefuseSession counts a browser or a call (ch) that did not get a
// session, by one of SessionRefusalReasons; any other reason is counted as
// "other".
func (m *Metrics) RefuseSession(reason string, ch Channel) {
	if !slices.Contains(SessionRefusalReasons, reason) {
		reason = "other"
	}
	m.SessionsRefused.WithLabelValues(reason, ch.String()).Inc()
}

// SetContextBudget records the configured bound on a model request's
// context in estimated tokens (0: none), the budget the context alert
// compares turnstile_session_context_tokens with.
func (m *Metrics) SetContextBudget(tokens int) {
	m.ContextBudget.Set(float64(max(tokens, 0)))
	m.Summary.setContextBudget(max(tokens, 0))
}

// InitContext is the session-init token estimate of a mode (chars/4),
// split into the system prompt and the tool declarations.
type InitContext struct {
	SystemPromptTokens    int `json:"systemPromptTokens"`
	ToolDeclarationTokens int `json:"toolDeclarationTokens"`
	TotalTokens           int `json:"totalTokens"`
}

// SetInitContext records a mode's session-init estimate split into the
// system prompt and the tool declarations: the split gauges, the total
// (turnstile_session_init_tokens_estimate, as SetInitTokens) and the
// summary's context view.
func (m *Metrics) SetInitContext(mode protocol.Mode, systemTokens, toolTokens int) {
	m.InitSystemTokens.WithLabelValues(string(mode)).Set(float64(systemTokens))
	m.InitToolTokens.WithLabelValues(string(mode)).Set(float64(toolTokens))
	m.SetInitTokens(mode, systemTokens+toolTokens)
	m.Summary.setInitContext(string(mode), systemTokens, toolTokens)
}

// InitContextOf returns what SetInitContext (or SetInitTokens, which
// leaves the split at zero) recorded for a mode.
func (m *Metrics) InitContextOf(mode protocol.Mode) InitContext {
	return m.Summary.initContextOf(string(mode))
}

// SessionStats are one browser connection's context and tool-call figures.
// The session calls ObserveContext with the estimate of every model request
// it makes, AddToolCalls after each turn, and Close once when it ends. All
// methods are safe for concurrent use and cost a few atomic operations.
type SessionStats struct {
	m         *Metrics
	current   atomic.Int64
	peak      atomic.Int64
	toolCalls atomic.Int64
	closed    atomic.Bool
}

// OpenSession starts the figures of a new browser connection's session.
func (m *Metrics) OpenSession() *SessionStats {
	s := &SessionStats{m: m}
	m.sessions.add(s)
	return s
}

// ObserveContext records the context estimate (chars/4: system
// instruction, tool declarations and history) of a model request the
// session makes. turnstile_session_context_tokens is the largest current
// one among live sessions.
func (s *SessionStats) ObserveContext(tokens int) {
	t := int64(max(tokens, 0))
	s.current.Store(t)
	for {
		p := s.peak.Load()
		if t <= p || s.peak.CompareAndSwap(p, t) {
			return
		}
	}
}

// AddToolCalls adds n tool calls (a turn's) to the session's count.
func (s *SessionStats) AddToolCalls(n int) {
	if n > 0 {
		s.toolCalls.Add(int64(n))
	}
}

// Close ends the session's figures: its peak context and tool-call count go
// to turnstile_session_peak_context_tokens and
// turnstile_tool_calls_per_session and to the summary, and it no longer
// counts as live. Only the first Close counts.
func (s *SessionStats) Close() {
	if s.closed.Swap(true) {
		return
	}
	s.m.sessions.remove(s)
	peak, calls := int(s.peak.Load()), int(s.toolCalls.Load())
	s.m.PeakContext.Observe(float64(peak))
	s.m.CallsPerSession.Observe(float64(calls))
	s.m.Summary.observeSessionEnd(peak, calls)
}

// liveSessions are the open SessionStats of this node.
type liveSessions struct {
	mu  sync.Mutex
	set map[*SessionStats]struct{}
}

func newLiveSessions() *liveSessions { return &liveSessions{set: map[*SessionStats]struct{}{}} }

func (l *liveSessions) add(s *SessionStats) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.set[s] = struct{}{}
}

func (l *liveSessions) remove(s *SessionStats) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.set, s)
}

// stats returns how many sessions are live and the largest current
// context estimate among them.
func (l *liveSessions) stats() (live, largest int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for s := range l.set {
		largest = max(largest, int(s.current.Load()))
	}
	return len(l.set), largest
}

func (l *liveSessions) max() int {
	_, m := l.stats()
	return m
}
