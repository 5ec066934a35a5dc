package tools_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
)

func spec(name string, mutate func(*tools.Spec)) tools.Spec {
	s := tools.Spec{
		Manifest: tools.Manifest{
			Name: name, Category: tools.CategoryAction, Modes: []protocol.Mode{tools.ModeText}, TimeoutMs: 10000,
			Redact:      tools.Redact{Args: []string{}, Result: []string{}},
			Parameters:  json.RawMessage(`{"type": "object", "properties": {"itemId": {"type": "string"}}, "required": ["itemId"]}`),
			Description: "Looks an item up.",
		},
		Handler: noop,
		Origin:  "MCP server shop (tool \"lookup\")",
	}
	if mutate != nil {
		mutate(&s)
	}
	return s
}

func TestNewToolBuildsAToolFromASpec(t *testing.T) {
	tool, err := tools.NewTool(spec("shop__lookup", nil))
	if err != nil {
		t.Fatal(err)
	}
	if tool.Guide != "Looks an item up." || tool.Origin() != `MCP server shop (tool "lookup")` || strings.Join(tool.ArgNames(), ",") != "itemId" {
		t.Errorf("tool = %+v", tool.Manifest)
	}
	// camelCase arguments (common in MCP schemas) are validated like any.
	if err := tool.ValidateArgs(json.RawMessage(`{}`)); err == nil || !strings.Contains(err.Error(), "missing required property 'itemId'") {
		t.Errorf("ValidateArgs({}) = %v", err)
	}
	if err := tool.ValidateArgs(json.RawMessage(`{"itemId": "a"}`)); err != nil {
		t.Errorf("ValidateArgs = %v", err)
	}
}

func TestNewToolRefusesBadSpecs(t *testing.T) {
	cases := map[string]struct {
		mutate func(*tools.Spec)
		want   string
	}{
		"unsafe name":    {func(s *tools.Spec) { s.Name = "shop.lookup" }, "not safe for every provider"},
		"long name":      {func(s *tools.Spec) { s.Name = strings.Repeat("a", 65) }, "not safe for every provider"},
		"no modes":       {func(s *tools.Spec) { s.Modes = nil }, "modes: must list"},
		"bad mode":       {func(s *tools.Spec) { s.Modes = []protocol.Mode{"video"} }, `modes[0]: "video"`},
		"bad category":   {func(s *tools.Spec) { s.Category = "misc" }, `category "misc"`},
		"timeout":        {func(s *tools.Spec) { s.TimeoutMs = 600001 }, "timeoutMs: must be between"},
		"no description": {func(s *tools.Spec) { s.Description = " " }, "description is empty"},
		"not an object":  {func(s *tools.Spec) { s.Parameters = json.RawMessage(`{"type": "string"}`) }, `top-level "type" must be "object"`},
		"invalid schema": {func(s *tools.Spec) { s.Parameters = json.RawMessage(`{"type": "object", "minProperties": -1}`) }, "not a valid JSON Schema"},
		"external ref": {func(s *tools.Spec) {
			s.Parameters = json.RawMessage(`{"type": "object", "$ref": "https://example.com/s.json"}`)
		}, "not a valid JSON Schema"},
		"redact unknown":   {func(s *tools.Spec) { s.Redact.Args = []string{"item"} }, `redact.args lists "item"`},
		"no handler":       {func(s *tools.Spec) { s.Handler = nil }, "handler is nil"},
		"http block":       {func(s *tools.Spec) { s.HTTP = &tools.HTTPSpec{URL: "https://x"} }, "loaded from its folder"},
		"missing schema":   {func(s *tools.Spec) { s.Parameters = nil }, "parameters: missing"},
		"schema not JSON":  {func(s *tools.Spec) { s.Parameters = json.RawMessage(`{`) }, "parameters: invalid JSON"},
		"schema not a map": {func(s *tools.Spec) { s.Parameters = json.RawMessage(`[]`) }, "must be a JSON Schema object"},
	}
	for name, c := range cases {
		_, err := tools.NewTool(spec("shop__lookup", c.mutate))
		var le *tools.LoadError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &le) {
			t.Errorf("%s: err = %v, want a LoadError mentioning %q", name, err, c.want)
		}
	}
}

func TestCombineJoinsSourcesAndRefusesADuplicateNameNamingBoth(t *testing.T) {
	base, err := tools.LoadWith(toolFS(map[string][2]string{"echo": {echoSchema, echoGuide}}),
		tools.LoadOptions{Origin: "the built-in tools", Handlers: map[string]tools.Handler{"echo": noop}})
	if err != nil {
		t.Fatal(err)
	}
	lookup, err := tools.NewTool(spec("shop__lookup", nil))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.Combine(base.Tools(), []*tools.Tool{lookup})
	if err != nil || names(reg.Tools()) != "echo,shop__lookup" {
		t.Fatalf("combined: %v, %v", reg, err)
	}
	if alone, _ := tools.Combine(base.Tools()); alone.Version() != base.Version() {
		t.Errorf("combining one registry's tools changed its version")
	}
	if reg.Version() == base.Version() {
		t.Errorf("adding a tool kept the version")
	}
	// A change to a spec's metadata changes the version.
	confirmed, _ := tools.NewTool(spec("shop__lookup", func(s *tools.Spec) { s.RequiresConfirmation = true }))
	if other, _ := tools.Combine(base.Tools(), []*tools.Tool{confirmed}); other.Version() == reg.Version() {
		t.Errorf("requiresConfirmation is not in the version")
	}

	echo2, _ := tools.NewTool(spec("echo", func(s *tools.Spec) { s.Origin = "MCP server x" }))
	_, err = tools.Combine(base.Tools(), []*tools.Tool{echo2})
	if err == nil || !strings.Contains(err.Error(), "tool echo: defined twice: by the built-in tools and by MCP server x") {
		t.Errorf("duplicate: %v", err)
	}
}

func TestCatalogSwapsWholeRegistriesAndHoldersKeepTheirs(t *testing.T) {
	var mu sync.Mutex
	specs := []tools.Spec{spec("a__one", nil)}
	fail := false
	build := func() (*tools.Registry, error) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return nil, errors.New("collision")
		}
		var ts []*tools.Tool
		for _, s := range specs {
			tool, err := tools.NewTool(s)
			if err != nil {
				return nil, err
			}
			ts = append(ts, tool)
		}
		return tools.Combine(ts)
	}
	cat, err := tools.NewCatalog(build)
	if err != nil {
		t.Fatal(err)
	}
	held := cat.Current()
	if reg, changed, err := cat.Rebuild(); err != nil || changed || reg != held {
		t.Errorf("rebuild without a change: changed %v, same %v, %v", changed, reg == held, err)
	}
	mu.Lock()
	specs = append(specs, spec("a__two", nil))
	mu.Unlock()
	reg, changed, err := cat.Rebuild()
	if err != nil || !changed || reg != cat.Current() || names(reg.Tools()) != "a__one,a__two" {
		t.Fatalf("rebuild: %v %v %v", names(reg.Tools()), changed, err)
	}
	if names(held.Tools()) != "a__one" {
		t.Errorf("a held registry changed: %s", names(held.Tools()))
	}
	mu.Lock()
	fail = true
	mu.Unlock()
	if reg, changed, err := cat.Rebuild(); err == nil || changed || reg != cat.Current() || names(reg.Tools()) != "a__one,a__two" {
		t.Errorf("failed rebuild replaced the registry")
	}
	if _, err := tools.NewCatalog(build); err == nil {
		t.Errorf("NewCatalog ignored the build error")
	}
}

func TestPolicyRedactOverridesAndToleratedMissingTools(t *testing.T) {
	lookup, _ := tools.NewTool(spec("shop__lookup", nil))
	reg, _ := tools.Combine([]*tools.Tool{lookup})
	path := filepath.Join(t.TempDir(), "p.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	write("tools:\n  shop__lookup:\n    redact: {args: [itemId]}\n  later__x: {timeoutMs: 100}\n")
	out, p, warnings, err := reg.ApplyPolicyFileMissing(path, func(name string) bool { return strings.HasPrefix(name, "later__") })
	if err != nil || p == nil || len(warnings) != 1 || !strings.Contains(warnings[0].Error(), "p.yaml:4: tools.later__x: no such tool yet") {
		t.Fatalf("warnings %v, err %v", warnings, err)
	}
	tool, _ := out.Lookup("shop__lookup")
	if shown := tool.RedactArgs(map[string]any{"itemId": "a"}); shown["itemId"] != "a" || len(tool.Redact.Result) != 0 {
		t.Errorf("redact override: %v %+v", shown, tool.Redact)
	}
	if out.Version() == reg.Version() {
		t.Errorf("a redact override kept the version")
	}
	// Without the tolerance, the unknown tool is an error.
	if _, _, err := reg.ApplyPolicyFile(path); err == nil || !strings.Contains(err.Error(), "tools.later__x: no such tool (registered: shop__lookup)") {
		t.Errorf("strict: %v", err)
	}

	write("tools:\n  shop__lookup:\n    redact: {args: [item_id]}\n")
	if _, _, err := reg.ApplyPolicyFile(path); err == nil || !strings.Contains(err.Error(), `tools.shop__lookup.redact.args: "item_id" is not a parameter of shop__lookup (parameters: itemId)`) {
		t.Errorf("unknown redact arg: %v", err)
	}
}
