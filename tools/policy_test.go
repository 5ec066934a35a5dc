package tools_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
)

const samplePolicyYAML = `# operator policy
budgets:
  text:  {maxRetrieval: 4, maxCalls: 8}
  voice: {maxRetrieval: 1, maxCalls: 2}
tools:
  kb_search:
    modes: [text]
    requiresConfirmation: true
    terminal: false
    softLatencyMs: 500
    timeoutMs: 3000
    category: action
`

const samplePolicyJSON = `{
  "budgets": {
    "text": {"maxRetrieval": 4, "maxCalls": 8},
    "voice": {"maxRetrieval": 1, "maxCalls": 2}
  },
  "tools": {
    "kb_search": {"modes": ["text"], "requiresConfirmation": true, "terminal": false,
                  "softLatencyMs": 500, "timeoutMs": 3000, "category": "action"}
  }
}`

func writePolicy(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func loadPolicy(t *testing.T, name, content string) *tools.Policy {
	t.Helper()
	p, err := tools.LoadPolicy(writePolicy(t, name, content))
	if err != nil {
		t.Fatalf("LoadPolicy: %v", err)
	}
	return p
}

func ptr[T any](v T) *T { return &v }

func TestLoadPolicyReadsYAMLAndJSONAlike(t *testing.T) {
	want := map[string]tools.ToolOverride{"kb_search": {
		Modes: []protocol.Mode{"text"}, RequiresConfirmation: ptr(true), Terminal: ptr(false),
		SoftLatencyMs: ptr(500), TimeoutMs: ptr(3000), Category: ptr(tools.CategoryAction),
	}}
	for _, f := range []struct{ name, content string }{
		{"policy.yaml", samplePolicyYAML}, {"policy.YML", samplePolicyYAML}, {"policy.json", samplePolicyJSON},
	} {
		t.Run(f.name, func(t *testing.T) {
			p := loadPolicy(t, f.name, f.content)
			if !strings.HasSuffix(p.File, f.name) {
				t.Errorf("File = %q", p.File)
			}
			if b, ok := p.Budget("text"); !ok || b != (tools.Budget{MaxRetrieval: 4, MaxCalls: 8}) {
				t.Errorf("Budget(text) = %+v, %v", b, ok)
			}
			if b, ok := p.Budget("voice"); !ok || b != (tools.Budget{MaxRetrieval: 1, MaxCalls: 2}) {
				t.Errorf("Budget(voice) = %+v, %v", b, ok)
			}
			if !reflect.DeepEqual(p.Tools, want) {
				t.Errorf("Tools = %+v", p.Tools)
			}
		})
	}
}

func TestPolicyBudgetOnlyForModesItSets(t *testing.T) {
	p := loadPolicy(t, "p.yaml", "budgets:\n  voice: {maxRetrieval: 0, maxCalls: 0}\n")
	if b, ok := p.Budget("voice"); !ok || b != (tools.Budget{}) {
		t.Errorf("Budget(voice) = %+v, %v; a zero budget (no tools in voice) must be kept", b, ok)
	}
	if _, ok := p.Budget("text"); ok {
		t.Error("Budget(text) reported set; the env/flag budget must apply")
	}
	var none *tools.Policy
	if _, ok := none.Budget("text"); ok {
		t.Error("a nil policy reported a budget")
	}
}

func TestLoadPolicyRefuses(t *testing.T) {
	cases := []struct {
		name, file, content string
		want                string // after the file path
	}{
		{"unknown top-level key", "p.yaml", "budget:\n  text: {maxRetrieval: 1, maxCalls: 2}\n",
			":1: budget: unknown key (allowed: budgets, tools)"},
		{"unknown mode in budgets", "p.yaml", "budgets:\n  video: {maxRetrieval: 1, maxCalls: 2}\n",
			":2: budgets.video: unknown mode"},
		{"unknown budget key", "p.yaml", "budgets:\n  text: {maxRetrieval: 1, maxCalls: 2, maxTokens: 3}\n",
			":2: budgets.text.maxTokens: unknown key"},
		{"negative maxCalls", "p.yaml", "budgets:\n  text:\n    maxRetrieval: 1\n    maxCalls: -2\n",
			":4: budgets.text.maxCalls: must not be negative"},
		{"retrieval above calls", "p.yaml", "budgets:\n  voice: {maxRetrieval: 3, maxCalls: 2}\n",
			":2: budgets.voice: maxRetrieval (3) must not exceed maxCalls (2)"},
		{"half a budget", "p.yaml", "budgets:\n  text: {maxRetrieval: 3}\n",
			":2: budgets.text: missing maxCalls"},
		{"quoted number", "p.yaml", "budgets:\n  text: {maxRetrieval: \"3\", maxCalls: 4}\n",
			"budgets.text.maxRetrieval: must be a whole number, not a string"},
		{"fraction", "p.json", `{"budgets": {"text": {"maxRetrieval": 1.5, "maxCalls": 4}}}`,
			":1: budgets.text.maxRetrieval: must be a whole number, not a fractional number"},
		{"manifest field a policy cannot set", "p.yaml", "tools:\n  kb_search:\n    parameters: {type: object}\n",
			":3: tools.kb_search.parameters: unknown key (allowed: modes, requiresConfirmation, terminal, sensitive, softLatencyMs, timeoutMs, category, redact)"},
		{"redact list of non-strings", "p.yaml", "tools:\n  kb_search:\n    redact: {args: [1]}\n",
			":3: tools.kb_search.redact.args[0]: must be a non-empty string"},
		{"redact unknown key", "p.yaml", "tools:\n  kb_search:\n    redact: {params: []}\n",
			":3: tools.kb_search.redact.params: unknown key (allowed: args, result)"},
		{"unknown mode in tool", "p.yaml", "tools:\n  kb_search: {modes: [text, video]}\n",
			":2: tools.kb_search.modes[1]: unknown mode"},
		{"empty modes", "p.yaml", "tools:\n  kb_search: {modes: []}\n",
			"tools.kb_search.modes: must be a non-empty list"},
		{"mode twice", "p.json", "{\"tools\": {\"kb_search\": {\n  \"modes\": [\"voice\", \"voice\"]}}}",
			":2: tools.kb_search.modes[1]: voice is listed twice"},
		{"unknown category", "p.yaml", "tools:\n  kb_search: {category: search}\n",
			"tools.kb_search.category: must be retrieval, action or utility"},
		{"zero timeout", "p.yaml", "tools:\n  kb_search: {timeoutMs: 0}\n",
			"tools.kb_search.timeoutMs: must be at least 1"},
		{"negative soft latency", "p.yaml", "tools:\n  kb_search: {softLatencyMs: -100}\n",
			"tools.kb_search.softLatencyMs: must not be negative"},
		{"timeout too long", "p.yaml", "tools:\n  kb_search: {timeoutMs: 600001}\n",
			"tools.kb_search.timeoutMs: must be at most 600000"},
		{"yes is not a boolean", "p.yaml", "tools:\n  kb_search: {requiresConfirmation: yes}\n",
			"tools.kb_search.requiresConfirmation: must be true or false, not a string"},
		{"tool override not a mapping", "p.yaml", "tools:\n  kb_search:\n",
			":2: tools.kb_search: must be a mapping, not null"},
		{"duplicate YAML key", "p.yaml", "tools:\n  kb_search: {terminal: true}\n  kb_search: {terminal: false}\n",
			`line 3: key "kb_search" already defined at line 2`},
		{"duplicate JSON key", "p.json", "{\"tools\": {\"kb_get\": {},\n \"kb_get\": {\"terminal\": true}}}",
			`line 2: key "kb_get" already defined at line 1`},
		{"two YAML documents", "p.yaml", "tools: {}\n---\nbudgets: {}\n", "holds one YAML document"},
		{"YAML syntax", "p.yaml", "tools: [\n", "parse:"},
		{"JSON syntax", "p.json", "{\n\"tools\": {,}}", "line 2: invalid character"},
		{"JSON trailing data", "p.json", `{"tools": {}} {}`, "unexpected data after the JSON value"},
		{"empty file", "p.yaml", "# nothing\n", "the policy is empty"},
		{"root is a list", "p.yaml", "- budgets\n", "must be a mapping, not a list"},
		{"unknown extension", "p.toml", "[budgets]\n", "the file name must end in .yaml, .yml or .json"},
		{"alias bomb", "p.yaml", aliasBomb(), "too many values"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writePolicy(t, c.file, c.content)
			p, err := tools.LoadPolicy(path)
			if err == nil {
				t.Fatalf("LoadPolicy accepted it: %+v", p)
			}
			if !strings.Contains(err.Error(), path+c.want) && !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, c.want)
			}
			if !strings.HasPrefix(err.Error(), path) {
				t.Errorf("err = %v, want it to start with the file name", err)
			}
			var pe *tools.PolicyError
			if !errors.As(err, &pe) || pe.File != path {
				t.Errorf("err is not a *PolicyError naming the file: %#v", err)
			}
		})
	}
}

// aliasBomb is a small YAML file whose aliases expand to 10^9 values.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i <= 8; i++ {
		prev := "*a" + string(rune('0'+i-1))
		b.WriteString("a" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [")
		b.WriteString(strings.Repeat(prev+", ", 9) + prev + "]\n")
	}
	b.WriteString("tools: {}\n")
	return b.String()
}

func TestLoadPolicyNamesTheKeyInExactErrorPositions(t *testing.T) {
	// The messages above are substrings; this pins one whole message.
	path := writePolicy(t, "ops.yaml", "budgets:\n  voice:\n    maxRetrieval: 5\n    maxCalls: 3\n")
	_, err := tools.LoadPolicy(path)
	want := path + ":2: budgets.voice: maxRetrieval (5) must not exceed maxCalls (3): retrieval calls count toward the call budget"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}

func TestLoadPolicyReportsEveryProblemAtOnce(t *testing.T) {
	path := writePolicy(t, "p.yaml", `budgets:
  text: {maxRetrieval: -1, maxCalls: 2}
  radio: {maxRetrieval: 1, maxCalls: 2}
tools:
  kb_search: {modes: [fax], timeoutMs: 0}
  kb_get: {colour: blue}
`)
	_, err := tools.LoadPolicy(path)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		":2: budgets.text.maxRetrieval", ":3: budgets.radio", ":5: tools.kb_search.modes[0]",
		":5: tools.kb_search.timeoutMs", ":6: tools.kb_get.colour",
	} {
		if !strings.Contains(err.Error(), path+want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

func TestLoadPolicyMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.yaml")
	_, err := tools.LoadPolicy(path)
	if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), path+": read:") {
		t.Fatalf("err = %v, want a read error naming the file that matches os.ErrNotExist", err)
	}
}

func TestLoadPolicyFollowsYAMLAnchors(t *testing.T) {
	p := loadPolicy(t, "p.yaml", `tools:
  kb_search: &fast {timeoutMs: 1500, softLatencyMs: 400}
  kb_get: *fast
`)
	for _, name := range []string{"kb_search", "kb_get"} {
		o := p.Tools[name]
		if o.TimeoutMs == nil || *o.TimeoutMs != 1500 || o.SoftLatencyMs == nil || *o.SoftLatencyMs != 400 {
			t.Errorf("%s: %+v", name, o)
		}
	}
}

func TestWithPolicyOverridesToolMetadata(t *testing.T) {
	reg := builtinRegistry(t)
	p := loadPolicy(t, "p.yaml", samplePolicyYAML)
	got, err := reg.WithPolicy(p)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := got.Lookup("kb_search")
	switch {
	case !slices.Equal(s.Modes, []protocol.Mode{"text"}):
		t.Errorf("modes = %v", s.Modes)
	case !s.RequiresConfirmation || s.Terminal || s.Category != tools.CategoryAction:
		t.Errorf("flags: %+v", s.Manifest)
	case s.Timeout().Milliseconds() != 3000 || s.SoftLatencyIn("text").Milliseconds() != 500 ||
		s.SoftLatencyIn("voice").Milliseconds() != 500:
		t.Errorf("latencies: %v %v %v", s.Timeout(), s.SoftLatencyIn("text"), s.SoftLatencyIn("voice"))
	case s.Handler == nil:
		t.Error("handler lost")
	}
	if err := s.ValidateArgs([]byte(`{"query": "refunds"}`)); err != nil {
		t.Errorf("argument validation broke: %v", err)
	}
	if voice := "," + names(got.ForMode(tools.ModeVoice)) + ","; strings.Contains(voice, ",kb_search,") || !strings.Contains(voice, ",kb_get,") {
		t.Errorf("ForMode(voice) = %s, want kb_get without kb_search", voice)
	}
	orig, _ := reg.Lookup("kb_search")
	if !slices.Equal(orig.Modes, []protocol.Mode{"text", "voice"}) || orig.RequiresConfirmation || orig.Timeout().Milliseconds() != 5000 {
		t.Errorf("the original registry changed: %+v", orig.Manifest)
	}
	g, _ := got.Lookup("kb_get")
	o, _ := reg.Lookup("kb_get")
	if !reflect.DeepEqual(g.Manifest, o.Manifest) {
		t.Errorf("kb_get changed without an override")
	}
}

func TestWithPolicyVersionFollowsEffectiveMetadata(t *testing.T) {
	reg := builtinRegistry(t)
	apply := func(content string) string {
		t.Helper()
		got, err := reg.WithPolicy(loadPolicy(t, "p.yaml", content))
		if err != nil {
			t.Fatal(err)
		}
		return got.Version()
	}
	base := reg.Version()
	same := map[string]string{
		"budgets only":           "budgets:\n  text: {maxRetrieval: 1, maxCalls: 1}\n",
		"empty override":         "tools:\n  kb_get: {}\n",
		"values of the manifest": "tools:\n  kb_search: {modes: [voice, text], timeoutMs: 5000, terminal: false, category: retrieval}\n",
	}
	for what, content := range same {
		if v := apply(content); v != base {
			t.Errorf("%s: version %s, want the registry's %s (nothing effective changed)", what, v, base)
		}
	}
	seen := map[string]string{base: "no policy"}
	for what, content := range map[string]string{
		"timeout":      "tools:\n  kb_search: {timeoutMs: 4000}\n",
		"timeout kb":   "tools:\n  kb_get: {timeoutMs: 4000}\n",
		"confirmation": "tools:\n  kb_search: {requiresConfirmation: true}\n",
		"modes":        "tools:\n  kb_search: {modes: [voice]}\n",
		"full":         samplePolicyYAML,
	} {
		v := apply(content)
		if prev, dup := seen[v]; dup {
			t.Errorf("%s: version %s equals that of %s", what, v, prev)
		}
		seen[v] = what
		if again := apply(content); again != v {
			t.Errorf("%s: the same policy gave versions %s and %s", what, v, again)
		}
	}
}

func TestWithPolicyRefusesUnknownTools(t *testing.T) {
	reg := builtinRegistry(t)
	path := writePolicy(t, "p.yaml", "tools:\n  kb_get: {terminal: true}\n  kb_serch: {timeoutMs: 100}\n  web_fetch: {}\n")
	p, err := tools.LoadPolicy(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = reg.WithPolicy(p)
	if err == nil {
		t.Fatal("WithPolicy accepted overrides of unknown tools")
	}
	for _, want := range []string{
		path + ":3: tools.kb_serch: no such tool (registered: ",
		path + ":4: tools.web_fetch: no such tool (registered: ",
		"kb_get, kb_search",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

func TestWithPolicyChecksHandBuiltOverrides(t *testing.T) {
	reg := builtinRegistry(t)
	p := &tools.Policy{File: "inline", Tools: map[string]tools.ToolOverride{
		"kb_get": {TimeoutMs: ptr(-1), Modes: []protocol.Mode{"text", "text"}, Category: ptr(tools.Category("fetch"))},
	}}
	_, err := reg.WithPolicy(p)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"inline: tools.kb_get: timeoutMs", "modes[1]", "category"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	if same, err := reg.WithPolicy(nil); err != nil || same != reg {
		t.Errorf("WithPolicy(nil) = %p, %v; want the registry itself", same, err)
	}
}

func TestApplyPolicyFileReportsValueAndNameProblemsTogether(t *testing.T) {
	reg := builtinRegistry(t)
	path := writePolicy(t, "p.yaml", "tools:\n  kb_serch: {terminal: true}\n  kb_get: {timeoutMs: -5}\n  web: {modes: [fax]}\n")
	_, _, err := reg.ApplyPolicyFile(path)
	if err == nil {
		t.Fatal("accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{
		path + ":2: tools.kb_serch: no such tool",
		path + ":3: tools.kb_get.timeoutMs: must not be negative",
		path + ":4: tools.web: no such tool",
		path + ":4: tools.web.modes[0]: unknown mode",
	}
	if len(lines) != len(want) {
		t.Fatalf("%d problems, want %d:\n%v", len(lines), len(want), err)
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("problem %d = %q, want it to start with %q", i, lines[i], want[i])
		}
	}

	good := writePolicy(t, "good.json", samplePolicyJSON)
	got, p, err := reg.ApplyPolicyFile(good)
	if err != nil || p == nil || p.File != good {
		t.Fatalf("ApplyPolicyFile(good) = %v, %v", p, err)
	}
	if s, _ := got.Lookup("kb_search"); !s.RequiresConfirmation {
		t.Error("the override was not applied")
	}
}
