package mcp_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tools/mcp"
)

func writeConfig(t testing.TB, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func lookup(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestConfigReadsStdioAndHTTPServersWithEnvironmentReferences(t *testing.T) {
	path := writeConfig(t, `{"mcpServers": {
	  "tickets": {"type": "http", "url": "https://${TICKETS_HOST}/mcp", "headers": {"Authorization": "Bearer ${TICKETS_TOKEN}"}},
	  "my.notes": {"command": "notes-mcp", "args": ["--token", "${NOTES_TOKEN}"], "env": {"NOTES_DB": "/var/notes", "EMPTY": "${EMPTY}"}, "cwd": "/tmp"},
	  "off": {"command": "x", "disabled": true}
	}}`)
	cfg, err := mcp.LoadConfig(path, lookup(map[string]string{"TICKETS_HOST": "t.example", "TICKETS_TOKEN": "tok", "NOTES_TOKEN": "n", "EMPTY": ""}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.File != path || len(cfg.Servers) != 2 {
		t.Fatalf("config = %+v", cfg)
	}
	notes, tickets := cfg.Servers[0], cfg.Servers[1]
	if notes.Name != "my.notes" || notes.Prefix != "my_notes" || notes.Transport() != "stdio" || notes.Command != "notes-mcp" ||
		strings.Join(notes.Args, " ") != "--token n" || notes.Env["NOTES_DB"] != "/var/notes" || notes.Env["EMPTY"] != "" || notes.Cwd != "/tmp" {
		t.Errorf("stdio server = %+v", notes)
	}
	for _, shown := range []string{fmt.Sprintf("%+v", cfg.Servers), fmt.Sprint(cfg.Servers)} {
		if strings.Contains(shown, "tok") || strings.Contains(shown, "--token") || !strings.Contains(shown, "Authorization") {
			t.Errorf("printing the servers shows secrets or hides header names: %s", shown)
		}
	}
	if tickets.Prefix != "tickets" || tickets.Transport() != "http" || tickets.URL != "https://t.example/mcp" ||
		tickets.Headers["Authorization"] != "Bearer tok" {
		t.Errorf("http server = %+v", tickets)
	}
}

func TestConfigRefusesInvalidFilesWithClearMessages(t *testing.T) {
	cases := []struct{ name, content, want string }{
		{"not JSON", `{"mcpServers": `, "not a JSON object"},
		{"no servers", `{}`, `no "mcpServers" object`},
		{"unknown top-level key", `{"mcpServers": {}, "servers": {}}`, `unknown key "servers"`},
		{"servers not an object", `{"mcpServers": []}`, "mcpServers: must be an object of servers"},
		{"duplicate server", `{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}`, `server "a" is defined twice`},
		{"neither", `{"mcpServers": {"a": {"args": []}}}`, `mcpServers.a: needs "command" (a stdio server) or "url"`},
		{"both", `{"mcpServers": {"a": {"command": "x", "url": "https://h/mcp"}}}`, "mcpServers.a: has both command"},
		{"unknown key", `{"mcpServers": {"a": {"command": "x", "timeout": 5}}}`, `mcpServers.a: unknown key "timeout" (allowed: command, args, env, cwd, url, headers, type, disabled, identity)`},
		{"sse", `{"mcpServers": {"a": {"type": "sse", "url": "https://h/sse"}}}`, "legacy SSE transport is not supported"},
		{"bad url", `{"mcpServers": {"a": {"url": "ftp://h/mcp"}}}`, "mcpServers.a: url: must be an absolute http or https URL"},
		{"args not strings", `{"mcpServers": {"a": {"command": "x", "args": [1]}}}`, "mcpServers.a: args: must be a list of strings"},
		{"env on http", `{"mcpServers": {"a": {"url": "https://h/mcp", "env": {"A": "b"}}}}`, "apply to stdio servers only"},
		{"headers on stdio", `{"mcpServers": {"a": {"command": "x", "headers": {"A": "b"}}}}`, "headers apply to HTTP servers only"},
		{"missing variable", `{"mcpServers": {"a": {"url": "https://h/mcp", "headers": {"Authorization": "Bearer ${NOPE}"}}}}`,
			"mcpServers.a: headers.Authorization: environment variable NOPE is not set"},
		{"prefix collision", `{"mcpServers": {"a.b": {"command": "x"}, "a_b": {"command": "y"}}}`, `"a.b" and "a_b" both name their tools a_b__`},
		{"name without letters", `{"mcpServers": {"--": {"command": "x"}}}`, "no letter or digit"},
		{"long name", `{"mcpServers": {"` + strings.Repeat("n", 31) + `": {"command": "x"}}}`, "longer than 30 characters"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeConfig(t, c.content)
			_, err := mcp.LoadConfig(path, lookup(nil))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), path+": ") {
				t.Errorf("err = %v, want %q prefixed by the file", err, c.want)
			}
		})
	}
	if _, err := mcp.LoadConfig(filepath.Join(t.TempDir(), "nope.json"), nil); err == nil || !strings.Contains(err.Error(), "read:") {
		t.Errorf("missing file: %v", err)
	}
}

func TestNamesAreSafeForEveryProviderAndStable(t *testing.T) {
	cases := []struct{ server, tool, want string }{
		{"notes", "create_note", "notes__create_note"},
		{"notes", "search.notes", "notes__search_notes"},
		{"notes", "größe/prüfen", "notes__gr__e_pr_fen"},
		{"1password", "read", "mcp_1password__read"},
		{"github-enterprise", "list-issues", "github-enterprise__list-issues"},
	}
	for _, c := range cases {
		got := mcp.Namespace(mcp.Prefix(c.server), c.tool)
		if got != c.want || !tools.ProviderSafeName(got) {
			t.Errorf("Namespace(%q, %q) = %q, want %q (provider-safe)", c.server, c.tool, got, c.want)
		}
	}
	long := strings.Repeat("t", 80)
	a, b := mcp.Namespace("srv", long+"a"), mcp.Namespace("srv", long+"b")
	if len(a) != 64 || a == b || !tools.ProviderSafeName(a) || a != mcp.Namespace("srv", long+"a") || !strings.HasPrefix(a, "srv__ttt") {
		t.Errorf("long names %q and %q: want 64 characters, distinct, stable", a, b)
	}
}
