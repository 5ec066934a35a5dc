package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tools/builtin"
	"github.com/turnstile-gw/turnstile/tools/kb"
	"github.com/turnstile-gw/turnstile/tools/mcp"
)

// toolCatalog builds the gateway's tools: the built-in ones, the HTTP tools
// of TURNSTILE_TOOLS_DIR and the tools of the MCP servers of
// TURNSTILE_MCP_CONFIG, with the policy applied. It starts the MCP servers
// (closed with gw) and rebuilds the catalog whenever one of them changes
// its tools; a rebuild that fails keeps the current registry.
func toolCatalog(ctx context.Context, cfg Config, index *kb.Index, m *metrics.Metrics, log *slog.Logger, gw *gateway,
	extra []*tools.Tool) (*tools.Catalog, error) {
	client := &http.Client{} // Go tools' outbound calls; each is bounded by its call's ctx
	environ := os.Environ()
	handlers, err := builtin.Build(index, func(name string) tools.Deps {
		return tools.NewDeps(name, environ, client, log)
	})
	if err != nil {
		return nil, fmt.Errorf("built-in tools: %w", err)
	}
	builtins, err := tools.LoadWith(builtin.FS, tools.LoadOptions{Origin: "the built-in tools", Handlers: handlers})
	if err != nil {
		return nil, fmt.Errorf("tool registry: %w", err)
	}
	httpTools := &httpToolSet{} // replaced by a reload of the tools folder (tools_reload.go)
	if cfg.HTTPTools != nil {
		httpTools.tools = cfg.HTTPTools.Tools()
	}

	var hub *mcp.Hub
	rebuild := make(chan struct{}, 1)
	if cfg.MCP != nil && len(cfg.MCP.Servers) > 0 {
		hub, err = mcp.Start(ctx, cfg.MCP, mcp.Options{
			Log: log.With("component", "mcp"), Metrics: m, StartTimeout: cfg.MCPStartTimeout, Version: version,
			OnChange: func() {
				select {
				case rebuild <- struct{}{}:
				default:
				}
			},
		})
		if err != nil {
			return nil, fmt.Errorf("MCP servers (TURNSTILE_MCP_CONFIG=%s): %w", cfg.MCPConfigFile, err)
		}
		gw.closers = append(gw.closers, hub.Close)
		for _, st := range hub.Status() {
			if st.Up {
				log.Info("MCP server ready", "mcp_server", st.Name, "transport", st.Transport, "tools", st.Tools)
			} else {
				log.Warn("MCP server not reachable at startup; retrying in the background", "mcp_server", st.Name,
					"transport", st.Transport, "err", st.Err)
			}
		}
	}

	// At startup a policy entry may name a tool of a server that could not
	// be reached yet; later, of any server (its tools come and go).
	missing := func(string) bool { return false }
	if hub != nil {
		missing = hub.Missing
	}
	build := func() (*tools.Registry, error) {
		var mcpTools []*tools.Tool
		if hub != nil {
			mcpTools = hub.Tools()
		}
		reg, err := tools.Combine(builtins.Tools(), httpTools.get(), mcpTools, extra)
		if err != nil {
			return nil, fmt.Errorf("tool registry: %w", err)
		}
		reg, warnings, err := reg.WithPolicyMissing(cfg.Policy, missing)
		if err != nil {
			return nil, fmt.Errorf("policy file %s: %w", cfg.PolicyFile, err)
		}
		for _, w := range warnings {
			log.Warn("policy entry kept for a tool that is not registered yet", "err", w)
		}
		return reg, nil
	}
	catalog, err := tools.NewCatalog(build)
	if err != nil {
		return nil, err
	}
	gw.toolsReload = &toolsReloader{dir: cfg.ToolsDir, opts: cfg.httpToolOptions(), set: httpTools, catalog: catalog,
		m: m, log: log.With("component", "tools")}
	if hub == nil {
		return catalog, nil
	}
	missing = hub.Owns
	done := make(chan struct{})
	stopped := make(chan struct{})
	gw.closers = append(gw.closers, func() { close(done); <-stopped })
	select { // whatever changed between Start and the first build
	case rebuild <- struct{}{}:
	default:
	}
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			case <-rebuild:
			}
			reg, changed, err := catalog.Rebuild()
			switch {
			case err != nil:
				log.Error("tool registry rebuild failed; new sessions keep the current tools", "err", err,
					"version", reg.Version())
			case changed:
				log.Info("tool registry rebuilt: new sessions get the new tools", "version", reg.Version(),
					"tools", len(reg.Tools()))
			}
		}
	}()
	return catalog, nil
}
