package metrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of a reload of TURNSTILE_TOOLS_DIR (SIGHUP): the closed set of
// turnstile_tools_reloads_total's outcome label.
const (
	// ToolsReloadChanged: the folder was valid and new sessions get the
	// new registry.
	ToolsReloadChanged = "changed"
	// ToolsReloadUnchanged: the folder was valid and gave the registry in
	// use (same version).
	ToolsReloadUnchanged = "unchanged"
	// ToolsReloadFailed: the folder (or the registry built with it) was
	// invalid; the registry in use stays.
	ToolsReloadFailed = "failed"
)

// ToolsReloadOutcomes is the closed set, in documentation order.
var ToolsReloadOutcomes = []string{ToolsReloadChanged, ToolsReloadUnchanged, ToolsReloadFailed}

func newToolsReloads(f factory) *prometheus.CounterVec {
	c := f.counterVec("turnstile_tools_reloads_total",
		"Reloads of TURNSTILE_TOOLS_DIR (on SIGHUP), by outcome (changed, unchanged, failed: the registry in use stays).", "outcome")
	for _, o := range ToolsReloadOutcomes {
		c.WithLabelValues(o)
	}
	return c
}

// ToolsReload counts one reload of the tools folder; an outcome outside
// ToolsReloadOutcomes is counted as failed.
func (m *Metrics) ToolsReload(outcome string) {
	if !slices.Contains(ToolsReloadOutcomes, outcome) {
		outcome = ToolsReloadFailed
	}
	m.ToolsReloads.WithLabelValues(outcome).Inc()
}
