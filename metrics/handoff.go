package metrics

import "github.com/prometheus/client_golang/prometheus"

// Outcomes of a hand-off to a person (turnstile_handoffs_total): the help
// desk's POST accepted it, or gave up after its retries, or there is no
// desk (TURNSTILE_HANDOFF_URL unset: the browser and the event stream
// still hear of it).
type HandoffOutcome string

const (
	HandoffDelivered HandoffOutcome = "delivered"
	HandoffFailed    HandoffOutcome = "failed"
	HandoffUnsent    HandoffOutcome = "unsent"
)

// HandoffOutcomes is the closed set of the outcome label.
var HandoffOutcomes = []HandoffOutcome{HandoffDelivered, HandoffFailed, HandoffUnsent}

// Handoff counts a hand-off by the outcome of the help desk's notice.
func (m *Metrics) Handoff(o HandoffOutcome) {
	m.Handoffs.WithLabelValues(string(o)).Inc()
}

func newHandoffs(f factory) *prometheus.CounterVec {
	c := f.counterVec("turnstile_handoffs_total",
		"Conversations the model handed to a person (request_human), by outcome of the help desk's notice "+
			"(delivered, failed, unsent: no TURNSTILE_HANDOFF_URL).", "outcome")
	for _, o := range HandoffOutcomes {
		c.WithLabelValues(string(o))
	}
	return c
}
