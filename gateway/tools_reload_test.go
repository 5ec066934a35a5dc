package gateway_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/metrics"
)

// readyToolNames are the tool names a session.ready declares.
func readyToolNames(ready event) []string {
	var names []string
	ts, _ := ready["tools"].([]any)
	for _, tool := range ts {
		m, _ := tool.(map[string]any)
		name, _ := m["name"].(string)
		names = append(names, name)
	}
	return names
}

// sighup delivers SIGHUP to the gateway's reload loop, as serve does, and
// waits until the reload it causes has been counted with outcome.
func (g *testGateway) sighup(hup chan<- os.Signal, outcome metrics.ToolsReloadOutcome) {
	g.t.Helper()
	counter := g.gw.sessions.Metrics.ToolsReloads.WithLabelValues(string(outcome))
	before := testutil.ToFloat64(counter)
	hup <- syscall.SIGHUP
	testwait.For(g.t, "a reload counted "+string(outcome), func() bool { return testutil.ToFloat64(counter) == before+1 })
}

func TestSIGHUPReloadsTheToolsFolderForNewSessionsOnly(t *testing.T) {
	svc := newTicketService(t)
	dir := toolsDir(t, map[string]string{"create_ticket": fmt.Sprintf(createTicketSchema, svc.URL)})
	cfg := configWith(t, map[string]string{"TURNSTILE_TOOLS_DIR": dir, "TICKETS_API_KEY": "tk-123"})
	lookup := fakegemini.Call{Name: "lookup_ticket", Args: map[string]any{"id": "T-1"}}
	brain := fakegemini.NewScript(
		callStep(lookup), textStep("I cannot look tickets up."), // the session started before the reload
		callStep(lookup), textStep("T-1 is open."), // the one started after it
	)
	g := startGateway(t, cfg, brain)
	ctx, cancel := context.WithCancel(context.Background())
	hup := make(chan os.Signal, 1)
	done := make(chan struct{})
	go func() { defer close(done); watchReloads(ctx, g.gw.toolsReload, hup) }()
	t.Cleanup(func() { cancel(); <-done })

	old := g.dial("", nil)
	oldReady := old.start(nil)
	if names := readyToolNames(oldReady); !slices.Contains(names, "create_ticket") || slices.Contains(names, "lookup_ticket") {
		t.Fatalf("tools before the reload: %v", names)
	}

	// A second tool appears in the folder; SIGHUP.
	more := toolsDir(t, map[string]string{"lookup_ticket": fmt.Sprintf(lookupTicketSchema, svc.URL)})
	if err := os.Rename(filepath.Join(more, "lookup_ticket"), filepath.Join(dir, "lookup_ticket")); err != nil {
		t.Fatal(err)
	}
	g.sighup(hup, metrics.ToolsReloadChanged)

	fresh := g.dial("", nil)
	freshReady := fresh.start(nil)
	if names := readyToolNames(freshReady); !slices.Contains(names, "lookup_ticket") || !slices.Contains(names, "create_ticket") {
		t.Fatalf("a session started after the reload declares %v, want lookup_ticket too", names)
	}
	if freshReady["registryVersion"] == oldReady["registryVersion"] {
		t.Fatalf("registryVersion %v did not change with the tools", freshReady["registryVersion"])
	}
	// The live session keeps the registry it started with.
	if res := ofType(old.ask("look up T-1"), "tool.result"); len(res) != 1 || !refusedWith(res[0], "NOT_FOUND") {
		t.Fatalf("lookup_ticket in the session started before the reload: %v, want NOT_FOUND", res)
	}
	if res := ofType(fresh.ask("look up T-1"), "tool.result"); len(res) != 1 || res[0]["ok"] != true {
		t.Fatalf("lookup_ticket in the session started after the reload: %v, want it run", res)
	}

	// A broken manifest: the reload fails, naming the file, and nothing changes.
	broken := filepath.Join(dir, "lookup_broken")
	if err := os.Mkdir(broken, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, content := range map[string]string{"schema.json": `{"name": "lookup_broken",`, "guide.md": "# x\n\nBroken.\n"} {
		if err := os.WriteFile(filepath.Join(broken, f), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	g.sighup(hup, metrics.ToolsReloadFailed)
	if _, err := g.gw.toolsReload.reload(); err == nil || !strings.Contains(err.Error(), "lookup_broken: schema.json") {
		t.Fatalf("reload of a broken folder: %v, want an error naming lookup_broken/schema.json", err)
	}
	if errs := g.errors.all(); !slices.Contains(errs, "tools folder reload failed; new sessions keep the current tools") {
		t.Fatalf("ERROR lines %q, want the failed reload", errs)
	}
	if r := g.dial("", nil).start(nil); r["registryVersion"] != freshReady["registryVersion"] {
		t.Fatalf("after a failed reload new sessions get registry %v, want %v", r["registryVersion"], freshReady["registryVersion"])
	}

	// The folder fixed: a reload that finds the registry in use is unchanged.
	if err := os.RemoveAll(broken); err != nil {
		t.Fatal(err)
	}
	g.sighup(hup, metrics.ToolsReloadUnchanged)

	// The session started before the reload, resumed: moved to the node's registry and told.
	_ = old.c.CloseNow()
	again := g.dial("", nil)
	resumed := again.start(map[string]any{"resume": map[string]any{
		"sessionId": oldReady.str("sessionId"), "resumeToken": oldReady.str("resumeToken")}})
	if resumed["resumed"] != true || resumed["registryChanged"] != true || resumed["registryVersion"] != freshReady["registryVersion"] {
		t.Fatalf("resume after the reload: %v, want resumed, registryChanged, version %v", resumed, freshReady["registryVersion"])
	}
}

// The binary itself: a real SIGHUP reloads the folder, a broken one is
// logged naming its file and the process goes on serving.
func TestGatewayProcessReloadsTheToolsFolderOnSIGHUP(t *testing.T) {
	svc := newTicketService(t)
	dir := toolsDir(t, map[string]string{"create_ticket": fmt.Sprintf(createTicketSchema, svc.URL)})
	p := startProcess(t, "TURNSTILE_TOOLS_DIR="+dir, "TICKETS_API_KEY=tk-123")

	more := toolsDir(t, map[string]string{"lookup_ticket": fmt.Sprintf(lookupTicketSchema, svc.URL)})
	if err := os.Rename(filepath.Join(more, "lookup_ticket"), filepath.Join(dir, "lookup_ticket")); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the reload's log line", func() bool {
		return p.logHas("tools folder reloaded: new sessions get the new tools")
	})

	if err := os.Mkdir(filepath.Join(dir, "lookup_broken"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lookup_broken", "schema.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the failed reload's ERROR line naming the file", func() bool {
		return p.logHas("tools folder reload failed; new sessions keep the current tools", "lookup_broken")
	})
	select {
	case err := <-p.exited:
		p.exited <- err
		t.Fatalf("the gateway exited after a bad reload: %v", err)
	default:
	}
}
