package metrics

import (
	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/loopdetect"
	"github.com/turnstile-gw/turnstile/protocol"
)

// The orchestrator's policy metrics: refusals by a per-turn gate or the
// loop detector, slow tools, calls after untrusted output, actions
// answered from the ledger.

// Gate is a per-turn budget gate, the gate label of
// turnstile_gate_refusals_total. A closed set: Gates.
type Gate string

const (
	GateRetrieval Gate = "retrieval" // the mode's retrieval calls per turn
	GateTotal     Gate = "total"     // the mode's tool calls per turn
)

// Gates lists the gates.
var Gates = []Gate{GateRetrieval, GateTotal}

// GateRefusal counts a call refused by gate g in a turn of mode.
func (m *Metrics) GateRefusal(g Gate, mode protocol.Mode) {
	m.GateRefusals.WithLabelValues(string(g), string(mode)).Inc()
}

// LoopDetection counts a call refused as a loop by rule.
func (m *Metrics) LoopDetection(rule loopdetect.Rule) {
	m.LoopDetections.WithLabelValues(string(rule)).Inc()
}

// IntentApplied counts an intent applied to a session.
func (m *Metrics) IntentApplied(t intents.Type) {
	m.IntentsApplied.WithLabelValues(string(t)).Inc()
}

// SoftLatencyOverrun counts a call of tool (a bounded label: a registered
// name) in a turn of mode that answered after its soft latency budget.
func (m *Metrics) SoftLatencyOverrun(tool string, mode protocol.Mode) {
	m.SoftLatencyExceeded.WithLabelValues(tool, string(mode)).Inc()
}

// UntrustedAction is what the orchestrator did with a sensitive call made
// after untrusted tool output in its turn, the action label of
// turnstile_untrusted_context_total. A closed set: UntrustedActions.
type UntrustedAction string

const (
	UntrustedRefused UntrustedAction = "refused" // refused with UNTRUSTED_CONTEXT
	UntrustedConfirm UntrustedAction = "confirm" // put to the user for approval
)

// UntrustedActions lists the actions.
var UntrustedActions = []UntrustedAction{UntrustedRefused, UntrustedConfirm}

// UntrustedCall counts a sensitive call of tool after untrusted output.
func (m *Metrics) UntrustedCall(tool string, a UntrustedAction) {
	m.UntrustedContext.WithLabelValues(tool, string(a)).Inc()
}

// IdempotentRepeat counts an action call of tool answered from the call
// ledger, not run.
func (m *Metrics) IdempotentRepeat(tool string) {
	m.IdempotentRepeats.WithLabelValues(tool).Inc()
}
