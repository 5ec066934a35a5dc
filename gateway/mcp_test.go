package gateway_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/internal/mcptest"
	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// End-to-end tests of MCP tool servers: real servers written with the
// official SDK (this test binary started again as a stdio server, and a
// Streamable HTTP server on loopback), configured by TURNSTILE_MCP_CONFIG,
// their tools called by the model through the browser protocol.

func writeMCPConfig(t *testing.T, servers map[string]any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"mcpServers": servers})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func noteCall(title string) fakegemini.Call {
	return fakegemini.Call{Name: "notes__create_note", Args: map[string]any{"title": title}}
}

func TestMCPToolsAreCalledThroughTheBrowserProtocol(t *testing.T) {
	notesLog := filepath.Join(t.TempDir(), "notes.log")
	cfg := configWith(t, map[string]string{"TURNSTILE_MCP_CONFIG": writeMCPConfig(t, map[string]any{"notes": mcptest.StdioConfig(notesLog)})})
	brain := fakegemini.NewScript(
		callStep(fakegemini.Call{Name: "notes__echo", Args: map[string]any{"text": "hello from MCP"}}), textStep("It said hello."),
		callStep(noteCall("Call the roaster")), textStep("I need your approval first."),
		callStep(noteCall("Call the roaster")), textStep("Noted."),
	)
	g := startGateway(t, cfg, brain)
	if v := testutil.ToFloat64(g.gw.sessions.Metrics.MCPServerUp.WithLabelValues("notes")); v != 1 {
		t.Fatalf("turnstile_mcp_server_up{server=notes} = %v", v)
	}
	c := g.dial("", nil)
	c.start(nil)

	// A read-only tool runs at once; its arguments are not shown.
	evs := c.ask("say hello through the notes server")
	calls, res := ofType(evs, "tool.call"), ofType(evs, "tool.result")
	if len(calls) != 1 || calls[0].str("name") != "notes__echo" || len(res) != 1 || res[0]["ok"] != true {
		t.Fatalf("echo: %v", evs)
	}
	if args, _ := calls[0]["args"].(map[string]any); args["text"] != "[redacted]" {
		t.Errorf("tool.call args %v, want redacted", args)
	}
	if out := lastResponses(t, brain.Requests()[1])[0].Response["output"]; out != "hello from MCP" {
		t.Errorf("model got %v", lastResponses(t, brain.Requests()[1])[0].Response)
	}
	// MCP tools are declared with their inputSchema, and their guides are in
	// the system instruction.
	var schema map[string]any
	for _, d := range brain.Requests()[0].Tools[0].FunctionDeclarations {
		if d.Name == "notes__create_note" {
			schema, _ = d.ParametersJsonSchema.(map[string]any)
		}
	}
	if props, _ := schema["properties"].(map[string]any); props["title"] == nil || !strings.Contains(systemText(brain.Requests()[0]), "## notes__echo") {
		t.Errorf("notes__create_note declared with %v", schema)
	}

	// A destructive tool waits for the user's approval, then runs once.
	evs = c.ask("note that I must call the roaster")
	reqs := ofType(evs, "confirm.request")
	if len(reqs) != 1 || reqs[0].str("tool") != "notes__create_note" {
		t.Fatalf("confirm.request: %v", evs)
	}
	if args, _ := reqs[0]["args"].(map[string]any); args["title"] != "[redacted]" {
		t.Errorf("confirm.request args %v, want redacted", args)
	}
	if b, _ := os.ReadFile(notesLog); len(b) != 0 {
		t.Fatalf("a note was created before the approval: %q", b)
	}
	confirm(c, reqs[0].str("token"), true)
	if done := c.next(); done.typ() != "confirm.done" || done.str("outcome") != "approved" {
		t.Fatalf("confirm answered %v", done)
	}
	evs = c.until("turn.done")
	if res := ofType(evs, "tool.result"); len(res) != 1 || res[0]["ok"] != true {
		t.Fatalf("approved create_note: %v", res)
	}
	if out, _ := lastResponses(t, brain.Requests()[5])[0].Response["output"].(map[string]any); out["id"] != "n-1" {
		t.Errorf("model got %v", lastResponses(t, brain.Requests()[5])[0].Response)
	}
	if b, _ := os.ReadFile(notesLog); string(b) != "Call the roaster\n" {
		t.Fatalf("notes created: %q, want exactly one", b)
	}
}

func TestUnreachableMCPServerDoesNotStopTheGatewayAndItsPolicyEntryIsKept(t *testing.T) {
	srv := mcptest.NewHTTP()
	defer srv.Close()
	srv.SetDown(true)
	cfg := configWith(t, map[string]string{"TURNSTILE_MCP_CONFIG": writeMCPConfig(t, map[string]any{"tickets": map[string]any{"url": srv.URL}}),
		"TURNSTILE_MCP_START_TIMEOUT": "2s"})
	cfg = withPolicy(t, cfg, "tools:\n  tickets__echo: {requiresConfirmation: false, modes: [text, voice], redact: {args: [text], result: []}}\n")
	g := startGateway(t, cfg, fakegemini.NewScript())
	resp, err := http.Get(g.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz = %d with an MCP server down", resp.StatusCode)
	}
	if v := testutil.ToFloat64(g.gw.sessions.Metrics.MCPServerUp.WithLabelValues("tickets")); v != 0 {
		t.Fatalf("server_up = %v", v)
	}

	// It comes up: new sessions' registry has its tools, with the policy
	// entry applied; the registry sessions started with does not change.
	before := g.gw.catalog.Current()
	srv.SetDown(false)
	testwait.For(t, "the tickets server's tools", func() bool {
		_, ok := g.gw.catalog.Current().Lookup("tickets__echo")
		return ok
	})
	echo, _ := g.gw.catalog.Current().Lookup("tickets__echo")
	if echo.RequiresConfirmation || !echo.AllowedIn("voice") || strings.Join(echo.Redact.Args, ",") != "text" {
		t.Errorf("tickets__echo ignores the policy: %+v", echo.Manifest)
	}
	if _, ok := before.Lookup("tickets__echo"); ok || before.Version() == g.gw.catalog.Current().Version() {
		t.Errorf("the startup registry changed")
	}
}

func TestMCPPolicyEntryForAnUnknownToolOfAReachableServerIsAnError(t *testing.T) {
	srv := mcptest.NewHTTP()
	defer srv.Close()
	cfg := configWith(t, map[string]string{"TURNSTILE_MCP_CONFIG": writeMCPConfig(t, map[string]any{"tickets": map[string]any{"url": srv.URL}})})
	cfg = withPolicy(t, cfg, "tools:\n  tickets__ecko: {requiresConfirmation: false}\n")
	gw, err := assemble(t.Context(), cfg, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)), brains{})
	if err == nil {
		gw.close()
		t.Fatal("assemble accepted a policy entry for a tool the server does not have")
	}
	if !strings.Contains(err.Error(), "tools.tickets__ecko: no such tool") {
		t.Fatalf("err = %v", err)
	}
}

// After an MCP server changes its tools (notifications/tools/list_changed),
// new sessions get the new list; a session that was running keeps its own
// (the tool registry is pinned per session).
func TestMCPListChangedReachesNewSessionsOnly(t *testing.T) {
	srv := mcptest.NewHTTP()
	defer srv.Close()
	cfg := configWith(t, map[string]string{"TURNSTILE_MCP_CONFIG": writeMCPConfig(t, map[string]any{"tickets": map[string]any{"url": srv.URL}})})
	brain := fakegemini.NewScript(callStep(fakegemini.Call{Name: "tickets__added_later", Args: map[string]any{}}), textStep("ok"))
	g := startGateway(t, cfg, brain)
	toolNames := func(ready event) string {
		var names []string
		list, _ := ready["tools"].([]any)
		for _, x := range list {
			names = append(names, x.(map[string]any)["name"].(string))
		}
		return strings.Join(names, ",")
	}
	old := g.dial("", nil)
	before := old.start(nil)
	if strings.Contains(toolNames(before), "tickets__added_later") || !strings.Contains(toolNames(before), "tickets__echo") {
		t.Fatalf("tools at start: %s", toolNames(before))
	}

	srv.Grow()
	testwait.For(t, "the new tool in the registry", func() bool {
		_, ok := g.gw.catalog.Current().Lookup("tickets__added_later")
		return ok
	})
	fresh := g.dial("", nil)
	if after := fresh.start(nil); !strings.Contains(toolNames(after), "tickets__added_later") ||
		after.str("registryVersion") == before.str("registryVersion") {
		t.Fatalf("a new session's tools: %s (version %s)", toolNames(after), after.str("registryVersion"))
	}
	// The running session keeps the registry it started with.
	evs := old.ask("use the new tool")
	if r := ofType(evs, "tool.result"); len(r) != 1 || !refusedWith(r[0], "NOT_FOUND") {
		t.Fatalf("the old session called a tool it never had: %v", r)
	}
}
