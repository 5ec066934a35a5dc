package metrics

import "github.com/prometheus/client_golang/prometheus"

// ToolsReloadOutcome is the outcome of a reload of TURNSTILE_TOOLS_DIR
// (SIGHUP), the outcome label of turnstile_tools_reloads_total. A closed
// set: ToolsReloadOutcomes.
type ToolsReloadOutcome string

const (
	// ToolsReloadChanged: the folder was valid and new sessions get the
	// new registry.
	ToolsReloadChanged ToolsReloadOutcome = "changed"
	// ToolsReloadUnchanged: the folder was valid and gave the registry in
	// use (same version).
	ToolsReloadUnchanged ToolsReloadOutcome = "unchanged"
	// ToolsReloadFailed: the folder (or the registry built with it) was
	// invalid; the registry in use stays.
	ToolsReloadFailed ToolsReloadOutcome = "failed"
)

// ToolsReloadOutcomes is the closed set, in documentation order.
var ToolsReloadOutcomes = []ToolsReloadOutcome{ToolsReloadChanged, ToolsReloadUnchanged, ToolsReloadFailed}

func newToolsReloads(f factory) *prometheus.CounterVec {
	c := f.counterVec("turnstile_tools_reloads_total",
		"Reloads of TURNSTILE_TOOLS_DIR (on SIGHUP), by outcome (changed, unchanged, failed: the registry in use stays).", "outcome")
	for _, o := range ToolsReloadOutcomes {
		c.WithLabelValues(string(o))
	}
	return c
}

// ToolsReload counts one reload of the tools folder.
func (m *Metrics) ToolsReload(o ToolsReloadOutcome) {
	m.ToolsReloads.WithLabelValues(string(o)).Inc()
}
