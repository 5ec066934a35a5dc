package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/turnstile-gw/turnstile/internal/mcptest"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tools/mcp"
)

func TestMain(m *testing.M) {
	mcptest.ServeStdioIfAsked() // this binary is also the stdio test server
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}

type fixture struct {
	t       testing.TB
	hub     *mcp.Hub
	metrics *metrics.Metrics
	changes atomic.Int64
}

func testLog(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startHub writes an MCP config of servers and starts a hub on it.
func startHub(t testing.TB, servers map[string]any, tune func(*mcp.Options)) *fixture {
	t.Helper()
	b, err := json.Marshal(map[string]any{"mcpServers": servers})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := mcp.LoadConfig(writeConfig(t, string(b)), os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, metrics: metrics.New(prometheus.NewRegistry(), metrics.Build{})}
	opts := mcp.Options{Log: testLog(t), Metrics: f.metrics, MinBackoff: 100 * time.Millisecond,
		OnChange: func() { f.changes.Add(1) }}
	if tune != nil {
		tune(&opts)
	}
	f.hub, err = mcp.Start(context.Background(), cfg, opts)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(f.hub.Close)
	return f
}

func (f *fixture) registry() *tools.Registry {
	f.t.Helper()
	reg, err := tools.Combine(f.hub.Tools())
	if err != nil {
		f.t.Fatal(err)
	}
	return reg
}

func names(ts []*tools.Tool) string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// execute runs one call through the orchestrator's whole pipeline.
func execute(t *testing.T, reg *tools.Registry, m *metrics.Metrics, name, args string) orchestrator.Outcome {
	t.Helper()
	var a map[string]any
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		t.Fatal(err)
	}
	o := orchestrator.New(reg, m, testLog(t))
	return o.Execute(context.Background(), orchestrator.Call{ID: "c1", Name: name, Args: a, SessionID: "s1", Mode: tools.ModeText, Turn: 1})
}

const allTools = "notes__crash,notes__create_note,notes__echo,notes__fail,notes__getenv,notes__grow,notes__hang,notes__media,notes__search_notes"

func TestStdioServerToolsAreDiscoveredNamespacedWithMCPDefaults(t *testing.T) {
	f := startHub(t, map[string]any{"notes": mcptest.StdioConfig("")}, nil)
	reg := f.registry()
	if got := names(reg.Tools()); got != allTools {
		t.Fatalf("tools = %s\nwant    %s", got, allTools)
	}
	echo, _ := reg.Lookup("notes__echo")
	create, _ := reg.Lookup("notes__create_note")
	for _, tool := range []*tools.Tool{echo, create} {
		if tool.Category != tools.CategoryAction || !slices.Equal(tool.Modes, []protocol.Mode{"text"}) || tool.Timeout() != 10*time.Second ||
			len(tool.Redact.Args) != 0 || len(tool.Redact.Result) != 0 || tool.Terminal {
			t.Errorf("%s: %+v, want MCP defaults", tool.Name, tool.Manifest)
		}
		if !strings.Contains(tool.Origin(), "MCP server notes") {
			t.Errorf("%s origin %q", tool.Name, tool.Origin())
		}
	}
	if echo.RequiresConfirmation || !create.RequiresConfirmation {
		t.Errorf("confirmation: read-only echo %v, unannotated create_note %v; want false, true", echo.RequiresConfirmation, create.RequiresConfirmation)
	}
	if echo.Description != "Echo the text back." || !strings.Contains(echo.Guide, "A second paragraph") {
		t.Errorf("echo description %q guide %q", echo.Description, echo.Guide)
	}
	if strings.Join(create.ArgNames(), ",") != "body,title" {
		t.Errorf("create_note args %v", create.ArgNames())
	}
	if v := testutil.ToFloat64(f.metrics.MCPServerUp.WithLabelValues("notes")); v != 1 {
		t.Errorf("turnstile_mcp_server_up{server=notes} = %v", v)
	}
	// The registry version covers MCP tools.
	if reg.Version() == "" || reg.Version() == mustCombine(t).Version() {
		t.Errorf("version %q does not cover the MCP tools", reg.Version())
	}
}

func mustCombine(t *testing.T, parts ...[]*tools.Tool) *tools.Registry {
	reg, err := tools.Combine(parts...)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func TestCallsGoThroughThePipelineToTheServer(t *testing.T) {
	f := startHub(t, map[string]any{"notes": mcptest.StdioConfig("")}, nil)
	reg := f.registry()

	out := execute(t, reg, f.metrics, "notes__echo", `{"text": "hello"}`)
	if out.Refused || !out.Envelope.OK || out.Response["output"] != "hello" {
		t.Fatalf("echo: %+v", out)
	}
	// Nothing of an MCP tool's arguments is shown unless the policy says so.
	if shown := orchestrator.New(reg, f.metrics, testLog(t)).RedactedArgs("notes__echo", map[string]any{"text": "secret"}); shown["text"] != tools.Redacted {
		t.Errorf("shown args %v", shown)
	}

	out = execute(t, reg, f.metrics, "notes__search_notes", `{"query": "x"}`)
	if data, _ := out.Response["output"].(map[string]any); !out.Envelope.OK || data["total"] != float64(1) {
		t.Errorf("structured content: %+v", out.Response)
	}

	out = execute(t, reg, f.metrics, "notes__echo", `{"txt": "hello"}`)
	if typ, msg := errorOf(out); !out.Refused || typ != "VALIDATION" || !strings.Contains(msg, "missing required property 'text'") {
		t.Errorf("invalid arguments: %s %q (refused %v)", typ, msg, out.Refused)
	}

	out = execute(t, reg, f.metrics, "notes__fail", `{}`)
	if typ, msg := errorOf(out); typ != "PERMANENT" || msg != "quota exceeded for project 7" {
		t.Errorf("isError: %s %q", typ, msg)
	}

	out = execute(t, reg, f.metrics, "notes__media", `{}`)
	b, _ := json.Marshal(out.Response)
	for _, want := range []string{`"type":"image"`, `"mimeType":"image/png"`, `"bytes":1000`, `"type":"audio"`, `"bytes":300`,
		`"type":"resource_link"`, `"uri":"file:///reports/q3.pdf"`, `"bytes":2048`, `"type":"resource"`, `"text":"a chart"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("media result lacks %s: %s", want, b)
		}
	}
	if strings.Contains(string(b), "PNG") || strings.Contains(string(b), "iVBOR") || len(b) > 1000 {
		t.Errorf("media result carries raw bytes: %s", b)
	}
}

func errorOf(out orchestrator.Outcome) (string, string) {
	e, _ := out.Response["error"].(map[string]any)
	typ, _ := e["type"].(string)
	msg, _ := e["message"].(string)
	return typ, msg
}

// policy writes a policy file and applies it.
func policy(t *testing.T, reg *tools.Registry, yaml string) *tools.Registry {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := reg.ApplyPolicyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDestructiveToolNeedsConfirmationAndArgumentsAreValidatedAgainstInputSchema(t *testing.T) {
	srv := mcptest.NewHTTP()
	defer srv.Close()
	f := startHub(t, map[string]any{"notes": map[string]any{"url": srv.URL}}, nil)
	reg := f.registry()

	out := execute(t, reg, f.metrics, "notes__create_note", `{"title": "Buy milk"}`)
	if typ, _ := errorOf(out); !out.Refused || typ != "CONFIRMATION_REQUIRED" || srv.Created.Load() != 0 {
		t.Fatalf("unconfirmed destructive call: %+v, %d notes created", out.Response, srv.Created.Load())
	}

	// The policy overrides the defaults: no confirmation, arguments shown.
	reg = policy(t, reg, "tools:\n  notes__create_note:\n    requiresConfirmation: false\n    redact: {args: [title], result: [id]}\n")
	out = execute(t, reg, f.metrics, "notes__create_note", `{"title": ""}`)
	if typ, msg := errorOf(out); !out.Refused || typ != "VALIDATION" || !strings.Contains(msg, "'title' must be at least 1 characters") {
		t.Fatalf("empty title: %s %q", typ, msg)
	}
	out = execute(t, reg, f.metrics, "notes__create_note", `{"title": "Buy milk", "colour": "red"}`)
	if typ, msg := errorOf(out); typ != "VALIDATION" || !strings.Contains(msg, "unknown property 'colour' (allowed: body, title)") {
		t.Fatalf("unknown argument: %s %q", typ, msg)
	}
	if srv.Created.Load() != 0 {
		t.Fatalf("invalid calls reached the server: %d notes", srv.Created.Load())
	}
	out = execute(t, reg, f.metrics, "notes__create_note", `{"title": "Buy milk"}`)
	if data, _ := out.Response["output"].(map[string]any); !out.Envelope.OK || data["id"] != "n-1" || srv.Created.Load() != 1 {
		t.Fatalf("create_note: %+v", out.Response)
	}
	tool, _ := reg.Lookup("notes__create_note")
	if shown := tool.RedactArgs(map[string]any{"title": "Buy milk", "body": "2l"}); shown["title"] != "Buy milk" || shown["body"] != tools.Redacted {
		t.Errorf("policy redaction: %v", shown)
	}
}

func TestCrashedStdioServerAnswersTransientAndIsRestarted(t *testing.T) {
	notes := filepath.Join(t.TempDir(), "notes.log")
	f := startHub(t, map[string]any{"notes": mcptest.StdioConfig(notes)}, nil)
	reg := f.registry()

	out := execute(t, reg, f.metrics, "notes__crash", `{}`)
	if typ, _ := errorOf(out); typ != "TRANSIENT" || out.Envelope.Error == nil || !out.Envelope.Error.Retryable || !out.Envelope.Error.PartialSideEffects {
		t.Fatalf("crash mid-call: %+v", out.Envelope)
	}
	// Down now or soon, then back within the first backoff.
	testwait.For(t, "the restart", func() bool {
		return testutil.ToFloat64(f.metrics.MCPRestarts.WithLabelValues("notes")) >= 1 && f.hub.Status()[0].Up
	})
	st := f.hub.Status()[0]
	if !strings.Contains(st.Name, "notes") || st.Tools != 9 {
		t.Errorf("status after restart %+v", st)
	}
	if v := testutil.ToFloat64(f.metrics.MCPServerUp.WithLabelValues("notes")); v != 1 {
		t.Errorf("server_up after restart = %v", v)
	}
	// The same registry's tools work against the new process.
	if out := execute(t, reg, f.metrics, "notes__echo", `{"text": "back"}`); out.Response["output"] != "back" {
		t.Errorf("echo after restart: %+v", out.Response)
	}
}

func TestDownServerAnswersTransientAtOnce(t *testing.T) {
	srv := mcptest.NewHTTP()
	defer srv.Close()
	f := startHub(t, map[string]any{"notes": map[string]any{"url": srv.URL}}, func(o *mcp.Options) { o.MinBackoff = time.Hour })
	reg := f.registry()
	srv.SetDown(true)
	srv.CloseClientConnections()
	// The server is gone: the client notices when its stream breaks; a call
	// meanwhile fails fast, as TRANSIENT.
	out := execute(t, reg, f.metrics, "notes__echo", `{"text": "x"}`)
	if typ, _ := errorOf(out); typ != "TRANSIENT" || !out.Envelope.Error.Retryable {
		t.Fatalf("call to a server that went away: %+v", out.Response)
	}
	testwait.For(t, "the server to be marked down", func() bool { return !f.hub.Status()[0].Up })
	out = execute(t, reg, f.metrics, "notes__echo", `{"text": "x"}`)
	if typ, msg := errorOf(out); typ != "TRANSIENT" || !strings.Contains(msg, "not available right now") || out.Envelope.Error.PartialSideEffects {
		t.Fatalf("call while down: %+v", out.Envelope.Error)
	}
	if v := testutil.ToFloat64(f.metrics.MCPServerUp.WithLabelValues("notes")); v != 0 {
		t.Errorf("server_up while down = %v", v)
	}
	// Its tools stay registered while it is down.
	if got := names(f.hub.Tools()); got != allTools {
		t.Errorf("tools while down: %s", got)
	}
}

func TestHangingServerIsCutAtTheToolTimeoutAndDoesNotStallOtherCalls(t *testing.T) {
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			entry := mcptest.StdioConfig("")
			if transport == "http" {
				srv := mcptest.NewHTTP()
				defer srv.Close()
				entry = map[string]any{"url": srv.URL}
			}
			f := startHub(t, map[string]any{"notes": entry}, nil)
			reg := policy(t, f.registry(), "tools:\n  notes__hang: {timeoutMs: 300}\n")
			done := make(chan orchestrator.Outcome)
			go func() { done <- execute(t, reg, f.metrics, "notes__hang", `{}`) }()
			// Meanwhile, other calls to the same server are answered.
			if out := execute(t, reg, f.metrics, "notes__echo", `{"text": "still here"}`); out.Response["output"] != "still here" {
				t.Errorf("echo during a hanging call: %+v", out.Response)
			}
			out := <-done
			if typ, _ := errorOf(out); typ != "TIMEOUT" {
				t.Fatalf("hanging call: %+v", out.Response)
			}
			if out := execute(t, reg, f.metrics, "notes__echo", `{"text": "after"}`); out.Response["output"] != "after" {
				t.Errorf("echo after a hanging call: %+v", out.Response)
			}
		})
	}
}

func TestListChangedReachesNewRegistriesWhileOldOnesKeepTheirTools(t *testing.T) {
	srv := mcptest.NewHTTP()
	defer srv.Close()
	var cat atomic.Pointer[tools.Catalog]
	f := startHub(t, map[string]any{"notes": map[string]any{"url": srv.URL}}, nil)
	c, err := tools.NewCatalog(func() (*tools.Registry, error) { return tools.Combine(f.hub.Tools()) })
	if err != nil {
		t.Fatal(err)
	}
	cat.Store(c)
	pinned := c.Current() // a running session's registry

	srv.Grow()
	testwait.For(t, "the hub to list the new tool", func() bool { return f.changes.Load() > 0 })
	if _, changed, err := c.Rebuild(); err != nil || !changed {
		t.Fatalf("rebuild: changed %v, %v", changed, err)
	}
	if _, ok := c.Current().Lookup("notes__added_later"); !ok {
		t.Fatalf("a new session's registry lacks the new tool: %s", names(c.Current().Tools()))
	}
	if _, ok := pinned.Lookup("notes__added_later"); ok || pinned.Version() == c.Current().Version() {
		t.Fatalf("the running session's registry changed under it")
	}
	out := execute(t, c.Current(), f.metrics, "notes__added_later", `{}`)
	if out.Response["output"] != "later" {
		t.Errorf("new tool: %+v", out.Response)
	}
	// A rebuild with nothing new keeps the registry as it is.
	if reg, changed, err := c.Rebuild(); err != nil || changed || reg != c.Current() {
		t.Errorf("idle rebuild: changed %v, %v", changed, err)
	}
}

func TestStdioServerAnnouncesListChangedThroughItsOwnTool(t *testing.T) {
	f := startHub(t, map[string]any{"notes": mcptest.StdioConfig("")}, nil)
	if out := execute(t, f.registry(), f.metrics, "notes__grow", `{}`); out.Response["output"] != "grown" {
		t.Fatalf("grow: %+v", out.Response)
	}
	testwait.For(t, "the new tool", func() bool { return strings.Contains(names(f.hub.Tools()), "notes__added_later") })
	if f.changes.Load() < 1 {
		t.Errorf("OnChange was not called")
	}
}

func TestUnreachableHTTPServerDoesNotStopStartAndIsRetried(t *testing.T) {
	srv := mcptest.NewHTTP()
	defer srv.Close()
	srv.SetDown(true)
	begin := time.Now()
	f := startHub(t, map[string]any{"tickets": map[string]any{"url": srv.URL}}, nil)
	if time.Since(begin) > 5*time.Second {
		t.Errorf("Start waited %v for an unreachable server", time.Since(begin))
	}
	st := f.hub.Status()[0]
	if st.Up || st.Listed || st.Err == nil || len(f.hub.Tools()) != 0 {
		t.Fatalf("status of an unreachable server: %+v", st)
	}
	if !f.hub.Missing("tickets__create") || f.hub.Missing("other__x") || !f.hub.Owns("tickets__anything") {
		t.Errorf("Missing/Owns")
	}
	srv.SetDown(false)
	testwait.For(t, "the server to come up", func() bool { return f.hub.Status()[0].Up })
	if got := names(f.hub.Tools()); !strings.Contains(got, "tickets__echo") || f.changes.Load() < 1 || f.hub.Missing("tickets__echo") {
		t.Errorf("after coming up: tools %s, %d changes", got, f.changes.Load())
	}
	if testutil.ToFloat64(f.metrics.MCPRestarts.WithLabelValues("tickets")) < 1 {
		t.Errorf("restarts not counted")
	}
}

func TestStdioServersDoNotInheritTheGatewaysSecrets(t *testing.T) {
	t.Setenv("GEMINI_API_KEY", "gateway-secret")
	entry := mcptest.StdioConfig("")
	entry["env"].(map[string]string)["GIVEN"] = "to-the-server"
	f := startHub(t, map[string]any{"notes": entry}, func(o *mcp.Options) { o.Environ = nil })
	reg := policy(t, f.registry(), "tools:\n  notes__getenv: {requiresConfirmation: false}\n")
	if out := execute(t, reg, f.metrics, "notes__getenv", `{"name": "GEMINI_API_KEY"}`); out.Response["output"] != "" {
		t.Errorf("the server sees GEMINI_API_KEY: %+v", out.Response)
	}
	if out := execute(t, reg, f.metrics, "notes__getenv", `{"name": "GIVEN"}`); out.Response["output"] != "to-the-server" {
		t.Errorf("configured env: %+v", out.Response)
	}
	if out := execute(t, reg, f.metrics, "notes__getenv", `{"name": "PATH"}`); out.Response["output"] == "" {
		t.Errorf("PATH not passed on")
	}
}

func TestToolsSharingANameAreAStartupError(t *testing.T) {
	s := sdk.NewServer(&sdk.Implementation{Name: "clash", Version: "v1"}, nil)
	for _, name := range []string{"get.item", "get_item"} {
		s.AddTool(&sdk.Tool{Name: name, Description: "x", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{}, nil
			})
	}
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	defer mcptest.CloseSessions(s)
	defer hs.Close()
	defer hs.CloseClientConnections()
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"shop": map[string]any{"url": hs.URL}}})
	cfg, err := mcp.LoadConfig(writeConfig(t, string(b)), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = mcp.Start(context.Background(), cfg, mcp.Options{})
	if err == nil || !strings.Contains(err.Error(), `tools "get.item" and "get_item" both become shop__get_item`) {
		t.Fatalf("err = %v", err)
	}
}
