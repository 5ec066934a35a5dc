package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/server"
	"github.com/turnstile-gw/turnstile/session"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tracing"
)

// The parts of an assembled gateway, for a program that embeds it (and
// for internal/gatewaytest): read them, do not close them — Close and
// Shutdown do.

// Config is the configuration the gateway was assembled with.
func (g *Gateway) Config() Config { return g.cfg }

// Registry is the Prometheus registry the gateway's metrics are on.
func (g *Gateway) Registry() *prometheus.Registry { return g.reg }

// Sessions are the node's live sessions (counts, metrics, drain).
func (g *Gateway) Sessions() *session.Manager { return g.parts.sessions }

// Edge is the HTTP side: both servers, admission, draining.
func (g *Gateway) Edge() *server.Server { return g.parts.edge }

// Tools is the tool catalog; Tools().Current() is the registry new
// sessions pin.
func (g *Gateway) Tools() *tools.Catalog { return g.parts.catalog }

// OfflineModel is the in-process fake Gemini server, nil when the gateway
// talks to a real one.
func (g *Gateway) OfflineModel() *fakegemini.Server { return g.parts.fake }

// Tracing is the OpenTelemetry provider, nil with tracing off.
func (g *Gateway) Tracing() *tracing.Provider { return g.parts.tracing }

// ReloadTools reads TURNSTILE_TOOLS_DIR again, as a value on
// Options.Reload does, and returns the outcome counted in
// turnstile_tools_reloads_total (changed, unchanged or failed) and, when
// it failed, why.
func (g *Gateway) ReloadTools() (metrics.ToolsReloadOutcome, error) {
	return g.parts.toolsReload.reload()
}
