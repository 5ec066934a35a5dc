package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tools/builtin"
)

type toolsRun struct {
	code           int
	stdout, stderr string
}

func runTools(t *testing.T, env map[string]string, args ...string) toolsRun {
	t.Helper()
	var out, errOut bytes.Buffer
	code := realMain(append([]string{"tools"}, args...), configEnv(env), &out, &errOut)
	return toolsRun{code, out.String(), errOut.String()}
}

func builtinTools(t *testing.T) *tools.Registry {
	t.Helper()
	reg, err := tools.Load(builtin.FS, builtin.Handlers(nil))
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func writeToolsPolicy(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const toolsTestPolicy = "budgets:\n  voice: {maxRetrieval: 1, maxCalls: 2}\ntools:\n  kb_search: {modes: [text], timeoutMs: 3000}\n"

func TestToolsCommandCheckPassesBuiltins(t *testing.T) {
	reg := builtinTools(t)
	r := runTools(t, nil, "check")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	want := "ok: " + strconv.Itoa(len(reg.Tools())) + " tools (" + toolNames(reg) + "), registry version " + reg.Version() + "\n"
	if r.stdout != want {
		t.Errorf("stdout = %q\nwant     %q", r.stdout, want)
	}
}

func TestToolsCommandCheckAppliesPolicy(t *testing.T) {
	path := writeToolsPolicy(t, "policy.yaml", toolsTestPolicy)
	reg := builtinTools(t)
	p, err := tools.LoadPolicy(path)
	if err != nil {
		t.Fatal(err)
	}
	withPolicy, err := reg.WithPolicy(p)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		env  map[string]string
		args []string
	}{
		"flag":        {nil, []string{"check", "-policy", path}},
		"environment": {map[string]string{"TURNSTILE_POLICY": path}, []string{"check"}},
	} {
		t.Run(name, func(t *testing.T) {
			r := runTools(t, c.env, c.args...)
			if r.code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
			}
			if !strings.Contains(r.stdout, "registry version "+withPolicy.Version()+", policy "+path+"\n") ||
				withPolicy.Version() == reg.Version() {
				t.Errorf("stdout = %q, want the policy's version %s (built-ins alone: %s)", r.stdout, withPolicy.Version(), reg.Version())
			}
		})
	}
	r := runTools(t, map[string]string{"TURNSTILE_POLICY": "/no/such/policy.yaml"}, "check", "-policy=")
	if r.code != 0 || !strings.Contains(r.stdout, "registry version "+reg.Version()+"\n") {
		t.Errorf("-policy= should check without the environment's policy: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
}

func TestToolsCommandCheckPrintsEveryProblem(t *testing.T) {
	path := writeToolsPolicy(t, "policy.yaml", "tools:\n  kb_search: {timeoutMs: 0}\n  kb_serch: {terminal: true}\n")
	r := runTools(t, nil, "check", "-policy", path)
	if r.code != 1 || r.stdout != "" {
		t.Fatalf("exit %d, stdout %q; want 1 and nothing on stdout", r.code, r.stdout)
	}
	want := path + ":2: tools.kb_search.timeoutMs: must be at least 1\n" +
		path + ":3: tools.kb_serch: no such tool (registered: " + toolNames(builtinTools(t)) + ")\n" +
		"gateway tools check: 2 problems\n"
	if r.stderr != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", r.stderr, want)
	}

	path = writeToolsPolicy(t, "policy.json", `{"tools": {"kb_serch": {}, "web": {}}}`)
	r = runTools(t, nil, "check", "-policy", path)
	if r.code != 1 || strings.Count(r.stderr, "no such tool") != 2 || !strings.HasSuffix(r.stderr, "gateway tools check: 2 problems\n") {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
	}

	r = runTools(t, nil, "check", "-policy", filepath.Join(t.TempDir(), "missing.yaml"))
	if r.code != 1 || !strings.Contains(r.stderr, "missing.yaml: read:") {
		t.Errorf("missing policy file: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

func TestToolsCommandReportsToolsGeminiCannotRender(t *testing.T) {
	schema := `{"name": "pick", "category": "utility", "modes": ["text"], "redact": {"args": [], "result": []},
	  "parameters": {"type": "object", "properties": {"x": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}}}`
	fsys := fstest.MapFS{
		"pick/schema.json": {Data: []byte(schema)},
		"pick/guide.md":    {Data: []byte("# pick\n\nPicks.\n")},
	}
	noop := tools.HandlerFunc(func(context.Context, tools.Call) tools.Envelope { return tools.OK(nil) })
	reg, err := tools.Load(fsys, map[string]tools.Handler{"pick": noop})
	if err != nil {
		t.Fatal(err)
	}
	problems := renderProblems(reg)
	if len(problems) != 1 || !strings.Contains(problems[0].err.Error(), `tool pick: cannot be rendered for Gemini: gemini schema: at /properties/x: "oneOf"`) {
		t.Errorf("problems = %v", problems)
	}
	if p := renderProblems(builtinTools(t)); len(p) != 0 {
		t.Errorf("built-in tools cannot be rendered: %v", p)
	}
}

func TestToolsCommandBuildWritesRegistryDocument(t *testing.T) {
	out := filepath.Join(t.TempDir(), "tool_registry.json")
	path := writeToolsPolicy(t, "policy.yaml", toolsTestPolicy)
	r := runTools(t, map[string]string{"SOURCE_DATE_EPOCH": "1700000000"}, "build", "-o", out, "-policy", path)
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Version, Commit, BuiltAt string
		Tools                    []struct {
			Name      string
			Modes     []string
			TimeoutMs int
			Providers map[string]json.RawMessage
		}
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	reg := builtinTools(t)
	if doc.Commit != commit || doc.BuiltAt != "2023-11-14T22:13:20Z" || len(doc.Tools) != len(reg.Tools()) {
		t.Errorf("header: commit %q builtAt %q, %d tools", doc.Commit, doc.BuiltAt, len(doc.Tools))
	}
	if doc.Version == reg.Version() || !strings.Contains(r.stdout, "wrote "+out+": ") || !strings.Contains(r.stdout, doc.Version) {
		t.Errorf("version %s (built-ins alone %s), stdout %q", doc.Version, reg.Version(), r.stdout)
	}
	for _, tool := range doc.Tools {
		if tool.Name == "kb_search" && (strings.Join(tool.Modes, ",") != "text" || tool.TimeoutMs != 3000) {
			t.Errorf("kb_search ignores the policy: %+v", tool)
		}
		if tool.Providers["openai"] == nil || tool.Providers["gemini"] == nil {
			t.Errorf("%s: providers %v", tool.Name, tool.Providers)
		}
	}
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".tool_registry.json.*"))
	if len(leftovers) != 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}

	// The same inputs give the same bytes, on standard output with -o -.
	again := runTools(t, map[string]string{"SOURCE_DATE_EPOCH": "1700000000", "TURNSTILE_POLICY": path}, "build", "-o", "-")
	if again.code != 0 || again.stdout != string(data) {
		t.Errorf("build -o - differs from the file (exit %d):\n%s", again.code, again.stderr)
	}
}

func TestToolsCommandBuildWritesNothingOnProblems(t *testing.T) {
	out := filepath.Join(t.TempDir(), "tool_registry.json")
	path := writeToolsPolicy(t, "policy.yaml", "tools:\n  nope: {}\n")
	r := runTools(t, nil, "build", "-o", out, "-policy", path)
	if r.code != 1 || !strings.Contains(r.stderr, "tools.nope: no such tool") {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s was written despite the problems (stat: %v)", out, err)
	}
}

func TestToolsCommandUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		args []string
		code int
		want string
	}{
		{"no subcommand", nil, nil, 2, "Usage:"},
		{"unknown subcommand", nil, []string{"lint"}, 2, `unknown subcommand "lint"`},
		{"extra argument", nil, []string{"check", "kb_search"}, 2, `unexpected argument "kb_search"`},
		{"unknown flag", nil, []string{"build", "-out", "x"}, 2, "flag provided but not defined: -out"},
		{"new without a name", nil, []string{"new"}, 2, "give exactly one tool name"},
		{"new with a bad name", nil, []string{"new", "Weather"}, 2, `"Weather" is not a tool name`},
		{"bad SOURCE_DATE_EPOCH", map[string]string{"SOURCE_DATE_EPOCH": "yesterday"}, []string{"build", "-o", "-"}, 2, "SOURCE_DATE_EPOCH"},
		{"help", nil, []string{"help"}, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runTools(t, c.env, c.args...)
			if r.code != c.code || !strings.Contains(r.stderr, c.want) {
				t.Errorf("exit %d (want %d), stderr:\n%s", r.code, c.code, r.stderr)
			}
		})
	}
}
