package metrics

import (
	"time"

	"github.com/turnstile-gw/turnstile/protocol"
)

// ObserveToolCall records one finished tool call of a session of channel ch
// in Prometheus (ToolCalls, ToolDuration, ToolResultChars,
// ToolResultTokens) and in the Summary. tool must be a bounded label (a
// registered name or "unknown"); outcome is "ok" or the lower-case error
// type. resultChars is the size of the response sent to the model in
// characters (Unicode code points, as seed 004 sizes responses; not bytes);
// a negative one means the size is unknown: only the count and latency are
// recorded.
func (m *Metrics) ObserveToolCall(tool, outcome string, ch Channel, d time.Duration, resultChars int) {
	m.ToolCalls.WithLabelValues(tool, outcome, ch.String()).Inc()
	m.ToolDuration.WithLabelValues(tool).Observe(d.Seconds())
	if resultChars >= 0 {
		m.ToolResultChars.WithLabelValues(tool).Observe(float64(resultChars))
		m.ToolResultTokens.WithLabelValues(tool).Observe(float64(EstimateTokens(resultChars)))
	}
	m.Summary.ObserveTool(tool, d, resultChars, outcome)
}

// ObserveTurn records one ended turn of a session of channel ch: counted by
// mode and turn.done reason (Turns), its duration (TurnDuration) and its
// tool calls (ToolCallsPerTurn).
func (m *Metrics) ObserveTurn(mode protocol.Mode, reason protocol.TurnEnd, ch Channel, d time.Duration, toolCalls int) {
	m.Turns.WithLabelValues(string(mode), string(reason), ch.String()).Inc()
	m.TurnDuration.WithLabelValues(string(mode)).Observe(d.Seconds())
	m.ToolCallsPerTurn.WithLabelValues(string(mode)).Observe(float64(toolCalls))
}

// SetInitTokens records a mode's session init size estimate (system
// instruction plus tool declarations, ceil(chars/4)) in the InitTokens gauge and
// as the Summary's context tokens for that mode.
func (m *Metrics) SetInitTokens(mode protocol.Mode, tokens int) {
	m.InitTokens.WithLabelValues(string(mode)).Set(float64(tokens))
	m.Summary.SetContextTokens(string(mode), tokens)
}

// EstimateTokens is seed 004's token estimate of a text of n characters:
// ceil(n / 4), so that a 3-character answer is one token, not none.
func EstimateTokens(n int) int {
	if n <= 0 {
		return 0
	}
	return (n + 3) / 4
}
