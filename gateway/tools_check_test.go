package gateway_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/mcptest"
)

// `gateway tools check` with HTTP tools (-dir) and MCP servers
// (-mcp-config).

func TestToolsCheckValidatesAnHTTPToolsFolder(t *testing.T) {
	dir := toolsDir(t, map[string]string{"create_ticket": fmt.Sprintf(createTicketSchema, "https://tickets.example")})
	for name, c := range map[string]struct {
		env  map[string]string
		args []string
	}{
		"flag":        {map[string]string{"TICKETS_API_KEY": "k"}, []string{"check", "-dir", dir}},
		"environment": {map[string]string{"TICKETS_API_KEY": "k", "TURNSTILE_TOOLS_DIR": dir}, []string{"check"}},
	} {
		t.Run(name, func(t *testing.T) {
			r := runTools(t, c.env, c.args...)
			if r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, "create_ticket") ||
				!strings.HasPrefix(r.stdout, fmt.Sprintf("ok: %d tools", len(builtinTools(t).Tools())+1)) {
				t.Fatalf("exit %d, stdout %q, stderr:\n%s", r.code, r.stdout, r.stderr)
			}
		})
	}

	// A variable the headers need is missing, and a manifest is broken.
	broken := filepath.Join(dir, "broken")
	if err := os.Mkdir(broken, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(broken, "schema.json"), []byte(`{"name": "broken"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runTools(t, nil, "check", "-dir", dir)
	if r.code != 1 || r.stdout != "" ||
		!strings.Contains(r.stderr, dir+": tool create_ticket: schema.json: http.headers.Authorization: environment variable TICKETS_API_KEY is not set") ||
		!strings.Contains(r.stderr, dir+": tool broken: guide.md: read:") ||
		!strings.Contains(r.stderr, "missing properties 'category', 'modes', 'redact', 'parameters'") {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}

	r = runTools(t, nil, "check", "-dir", filepath.Join(t.TempDir(), "nope"))
	if r.code != 1 || !strings.Contains(r.stderr, "nope") {
		t.Errorf("missing folder: exit %d, stderr:\n%s", r.code, r.stderr)
	}

	// A folder tool may not take a built-in's name.
	clash := toolsDir(t, map[string]string{"kb_search": strings.Replace(fmt.Sprintf(createTicketSchema, "https://t"), `"create_ticket"`, `"kb_search"`, 1)})
	r = runTools(t, map[string]string{"TICKETS_API_KEY": "k"}, "check", "-dir", clash)
	if r.code != 1 || !strings.Contains(r.stderr, "tool kb_search: defined twice: by the built-in tools and by the tools directory "+clash) {
		t.Errorf("name clash: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

func TestToolsCheckListsTheToolsOfMCPServers(t *testing.T) {
	srv := mcptest.NewHTTP()
	defer srv.Close()
	down := mcptest.NewHTTP()
	defer down.Close()
	down.SetDown(true)
	config := writeMCPConfig(t, map[string]any{
		"notes":   mcptest.StdioConfig(""),
		"tickets": map[string]any{"url": srv.URL},
		"later":   map[string]any{"url": down.URL},
	})
	policy := writeToolsPolicy(t, "policy.yaml", "tools:\n  later__anything: {requiresConfirmation: false}\n  notes__echo: {modes: [text, voice]}\n")
	r := runTools(t, map[string]string{"TURNSTILE_MCP_START_TIMEOUT": "3s"}, "check", "-mcp-config", config, "-policy", policy)
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"MCP server notes (stdio): 9 tools\n", "MCP server tickets (http): 9 tools\n",
		"notes__create_note", "tickets__search_notes", "ok: " + fmt.Sprint(len(builtinTools(t).Tools())+18) + " tools"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	for _, want := range []string{"warning: MCP server later (http) cannot be reached",
		"warning: " + policy + ":2: tools.later__anything: no such tool yet"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}

	// A policy entry for a tool a reachable server does not have is an error.
	policy = writeToolsPolicy(t, "policy.yaml", "tools:\n  tickets__ecko: {requiresConfirmation: false}\n")
	r = runTools(t, map[string]string{"TURNSTILE_MCP_CONFIG": config, "TURNSTILE_MCP_START_TIMEOUT": "3s"}, "check", "-policy", policy)
	if r.code != 1 || !strings.Contains(r.stderr, policy+":2: tools.tickets__ecko: no such tool") {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
	}

	// A start timeout the gateway would refuse is refused here too, named.
	r = runTools(t, map[string]string{"TURNSTILE_MCP_START_TIMEOUT": "3"}, "check", "-mcp-config", config)
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "TURNSTILE_MCP_START_TIMEOUT: not a duration") {
		t.Errorf("start timeout without a unit: exit %d, stdout %q, stderr:\n%s", r.code, r.stdout, r.stderr)
	}

	bad := writeMCPConfig(t, map[string]any{"x": map[string]any{"command": "a", "url": "https://b"}})
	r = runTools(t, nil, "check", "-mcp-config", bad)
	if r.code != 1 || !strings.Contains(r.stderr, bad+": mcpServers.x: has both command") {
		t.Errorf("invalid config: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

func TestInvalidMCPConfigIsRefusedAtStartup(t *testing.T) {
	bad := writeMCPConfig(t, map[string]any{"x": map[string]any{"url": "https://h/mcp", "headers": map[string]string{"Authorization": "Bearer ${X_TOKEN}"}}})
	_, err := gateway.LoadConfig(nil, configEnv(map[string]string{"TURNSTILE_MCP_CONFIG": bad}))
	if err == nil || !strings.Contains(err.Error(), "TURNSTILE_MCP_CONFIG: "+bad+": mcpServers.x: headers.Authorization: environment variable X_TOKEN is not set") {
		t.Fatalf("err = %v", err)
	}
	_, err = gateway.LoadConfig([]string{"-mcp-config", filepath.Join(t.TempDir(), "none.json")}, configEnv(nil))
	if err == nil || !strings.Contains(err.Error(), "-mcp-config (TURNSTILE_MCP_CONFIG)=") {
		t.Fatalf("missing file: %v", err)
	}
}
