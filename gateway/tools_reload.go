package gateway

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"

	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tools/httptool"
)

// Reloading TURNSTILE_TOOLS_DIR on SIGHUP: the folder is read and checked
// again, as at start; a valid one replaces the HTTP tools the catalog
// builds with and the catalog is rebuilt, so that sessions started after
// it get the new registry while live ones keep the one they pinned (a
// resumed one moves to the node's current registry and is told
// registryChanged). An invalid folder, or a registry that cannot be built
// with it (a name clash, a policy entry), changes nothing: the error names
// the file, and turnstile_tools_reloads_total counts every outcome.

// httpToolSet is the HTTP tools the catalog builds with; a reload swaps
// them.
type httpToolSet struct {
	mu    sync.Mutex
	tools []*tools.Tool
}

func (s *httpToolSet) get() []*tools.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools
}

// swap installs ts and returns the tools it replaces.
func (s *httpToolSet) swap(ts []*tools.Tool) []*tools.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.tools
	s.tools = ts
	return old
}

// toolsReloader reloads the tools folder into the catalog.
type toolsReloader struct {
	dir     string
	opts    httptool.Options
	set     *httpToolSet
	catalog *tools.Catalog
	m       *metrics.Metrics
	log     *slog.Logger
	mu      sync.Mutex // one reload at a time
}

// errNoToolsDir is a reload asked of a gateway without TURNSTILE_TOOLS_DIR.
var errNoToolsDir = errors.New("no TURNSTILE_TOOLS_DIR to reload")

// reload reads the folder again and, when it is valid, makes the registry
// built with it current. It returns the outcome counted
// (metrics.ToolsReloadOutcomes) and, when it failed, why.
func (r *toolsReloader) reload() (metrics.ToolsReloadOutcome, error) {
	if r == nil || r.dir == "" {
		return "", errNoToolsDir
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	loaded, err := httptool.Load(os.DirFS(r.dir), "TURNSTILE_TOOLS_DIR "+r.dir, r.opts)
	if err != nil {
		return r.failed(err)
	}
	old := r.set.swap(loaded.Tools())
	reg, changed, err := r.catalog.Rebuild()
	if err != nil {
		r.set.swap(old)
		return r.failed(err)
	}
	outcome := metrics.ToolsReloadUnchanged
	if changed {
		outcome = metrics.ToolsReloadChanged
		r.m.InitTools(metricToolNames(reg))
		r.log.Info("tools folder reloaded: new sessions get the new tools; live sessions keep theirs",
			"dir", r.dir, "version", reg.Version(), "tools", len(reg.Tools()))
	} else {
		r.log.Info("tools folder reloaded: no change", "dir", r.dir, "version", reg.Version())
	}
	r.m.ToolsReload(outcome)
	return outcome, nil
}

func (r *toolsReloader) failed(err error) (metrics.ToolsReloadOutcome, error) {
	for _, e := range flattenErrors(err) {
		r.log.Error("tools folder reload failed; new sessions keep the current tools", "dir", r.dir, "err", e,
			"version", r.catalog.Current().Version())
	}
	r.m.ToolsReload(metrics.ToolsReloadFailed)
	return metrics.ToolsReloadFailed, err
}

// watchReloads reloads the tools folder at each signal on hup until ctx
// ends. serve feeds it SIGHUP.
func watchReloads(ctx context.Context, r *toolsReloader, hup <-chan os.Signal, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if _, err := r.reload(); errors.Is(err, errNoToolsDir) {
				log.Info("SIGHUP: " + err.Error() + "; nothing reloaded")
			}
		}
	}
}
