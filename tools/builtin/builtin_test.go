package builtin_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tools/builtin"
	"github.com/turnstile-gw/turnstile/tools/kb"
)

// Dependencies start process-lifetime workers in their init (bleve's
// analysis queue); only goroutines started after that count as leaks.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}

// registry loads the built-in manifests with handlers over the sample KB;
// it fails the build on any invalid manifest.
func registry(t *testing.T) *tools.Registry {
	t.Helper()
	x, err := kb.Load(kb.Sample)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	reg, err := tools.Load(builtin.FS, builtin.Handlers(x))
	if err != nil {
		t.Fatalf("built-in manifests are invalid:\n%v", err)
	}
	return reg
}

func TestBuiltinManifestsAreValid(t *testing.T) {
	reg := registry(t)
	for _, name := range []string{"kb_search", "kb_get"} {
		tool, ok := reg.Lookup(name)
		if !ok {
			t.Fatalf("%s missing", name)
		}
		if tool.Category != tools.CategoryRetrieval || !tool.AllowedIn(tools.ModeText) || !tool.AllowedIn(tools.ModeVoice) {
			t.Errorf("%s: category %s modes %v", name, tool.Category, tool.Modes)
		}
		// The manifests ask for 2 s; voice keeps its stricter default.
		if tool.Timeout().Milliseconds() != 5000 || tool.SoftLatencyIn(tools.ModeText).Milliseconds() != 2000 ||
			tool.SoftLatencyIn(tools.ModeVoice).Milliseconds() != 800 {
			t.Errorf("%s: timeout %v soft %v/%v", name, tool.Timeout(), tool.SoftLatencyIn(tools.ModeText),
				tool.SoftLatencyIn(tools.ModeVoice))
		}
		if tool.Description == "" || tool.RequiresConfirmation || tool.Terminal {
			t.Errorf("%s: %+v", name, tool.Manifest)
		}
	}
	// Every embedded folder is a registered tool with a handler, and the
	// other way round (tools.Load refuses a folder without a handler and a
	// handler without a folder; this also catches a folder the embed
	// pattern missed).
	entries, err := fs.ReadDir(builtin.FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	var folders, registered []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), "_") && !strings.HasPrefix(e.Name(), ".") {
			folders = append(folders, e.Name())
		}
	}
	for _, tool := range reg.Tools() {
		registered = append(registered, tool.Name)
	}
	got, want := strings.Join(registered, ","), strings.Join(builtin.Names(), ",")
	if got != want || strings.Join(folders, ",") != want || len(folders) == 0 {
		t.Errorf("registered tools %s, folders %v, constructors %s: want all three equal", got, folders, want)
	}
	// The interface tools of DESIGN §5 stay built in (a floor, not the list:
	// adding a tool needs no change here).
	for _, name := range []string{"kb_search", "kb_get", "ignore_user", "start_voice_session", "end_voice_session", "finish"} {
		if !slices.Contains(registered, name) {
			t.Errorf("%s is not built in", name)
		}
	}
}

func TestBuildGivesEachToolItsOwnDeps(t *testing.T) {
	var asked []string
	handlers, err := builtin.Build(nil, func(name string) tools.Deps {
		asked = append(asked, name)
		return tools.NewDeps(name, []string{"TURNSTILE_TOOL_KB_SEARCH__LIMIT=3"}, nil, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(asked, ",") != strings.Join(builtin.Names(), ",") || len(handlers) != len(asked) {
		t.Errorf("deps asked for %v, %d handlers; want every built-in tool once", asked, len(handlers))
	}
	// Without a knowledge base the KB tools answer INTERNAL, not panic.
	env := handlers["kb_get"].Handle(context.Background(), tools.Call{Args: json.RawMessage(`{"id": "x"}`)})
	if env.OK || env.Error.Type != tools.ErrInternal {
		t.Errorf("kb_get without a knowledge base: %+v", env)
	}
}

func TestNewDepsReadsTheToolsSettingsAndSecrets(t *testing.T) {
	d := tools.NewDeps("weather", []string{"TURNSTILE_TOOL_WEATHER__UNITS=metric", "TURNSTILE_TOOL_WEATHER__API_BASE=https://w",
		"TURNSTILE_TOOL_WEATHERMAP__UNITS=imperial", "TURNSTILE_TOOL_WEATHER_UNITS=wrong", "WEATHER_KEY=k1", "EMPTY="}, nil, nil)
	if len(d.Settings) != 2 || d.Settings["units"] != "metric" || d.Settings["api_base"] != "https://w" {
		t.Errorf("settings = %v", d.Settings)
	}
	if v, ok := d.Secret("WEATHER_KEY"); !ok || v != "k1" {
		t.Errorf("secret = %q %v", v, ok)
	}
	for _, name := range []string{"EMPTY", "MISSING"} {
		if _, ok := d.Secret(name); ok {
			t.Errorf("secret %s reported set", name)
		}
	}
	if d.HTTP == nil || d.Log == nil {
		t.Errorf("nil client or logger")
	}
}

// call validates args the way the orchestrator does, then runs the handler
// and returns the envelope as the model would see it (JSON).
func call(t *testing.T, reg *tools.Registry, ctx context.Context, name, args string) (tools.Envelope, map[string]any) {
	t.Helper()
	tool, _ := reg.Lookup(name)
	if err := tool.ValidateArgs(json.RawMessage(args)); err != nil {
		t.Fatalf("%s(%s): %v", name, args, err)
	}
	env := tool.Handler.Handle(ctx, tools.Call{ID: "c1", Mode: tools.ModeText, Args: json.RawMessage(args)})
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	var wire map[string]any
	if err := json.Unmarshal(b, &wire); err != nil {
		t.Fatal(err)
	}
	return env, wire
}

func TestKBSearchFindsReturnsDocument(t *testing.T) {
	reg := registry(t)
	env, wire := call(t, reg, context.Background(), "kb_search", `{"query": "can I get a refund for an opened bag"}`)
	if !env.OK {
		t.Fatalf("envelope %+v", env)
	}
	results := wire["data"].(map[string]any)["results"].([]any)
	if len(results) == 0 || len(results) > 5 {
		t.Fatalf("%d results, want 1–5 (default limit)", len(results))
	}
	first := results[0].(map[string]any)
	if first["id"] != "returns-and-refunds" || first["title"] != "Returns and refunds" {
		t.Errorf("first result %v", first)
	}
	for _, k := range []string{"id", "title", "snippet", "score"} {
		if _, ok := first[k]; !ok {
			t.Errorf("result lacks %q: %v", k, first)
		}
	}
	if len(first) != 4 {
		t.Errorf("result has extra keys: %v", first)
	}
}

func TestKBSearchHonoursLimit(t *testing.T) {
	reg := registry(t)
	_, wire := call(t, reg, context.Background(), "kb_search", `{"query": "coffee", "limit": 2}`)
	if n := len(wire["data"].(map[string]any)["results"].([]any)); n != 2 {
		t.Errorf("%d results, want 2", n)
	}
}

func TestKBSearchWithoutMatchReturnsEmptyArray(t *testing.T) {
	reg := registry(t)
	tool, _ := reg.Lookup("kb_search")
	env := tool.Handler.Handle(context.Background(), tools.Call{Args: json.RawMessage(`{"query": "xylophone zeppelin"}`)})
	if !env.OK {
		t.Fatalf("envelope %+v", env)
	}
	b, err := json.Marshal(env.Data)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"results":[]}` {
		t.Errorf("data = %s, want {\"results\":[]}", b)
	}
}

func TestKBGet(t *testing.T) {
	reg := registry(t)
	env, wire := call(t, reg, context.Background(), "kb_get", `{"id": "gift-cards"}`)
	if !env.OK {
		t.Fatalf("envelope %+v", env)
	}
	data := wire["data"].(map[string]any)
	if data["id"] != "gift-cards" || data["title"] != "Gift cards" || !strings.Contains(data["body"].(string), "never expire") {
		t.Errorf("data = %v", data)
	}
	tool, _ := reg.Lookup("kb_get")
	shown := tool.RedactResult(env.Data).(map[string]any)
	if shown["body"] != tools.Redacted || shown["title"] != "Gift cards" {
		t.Errorf("redacted result = %v, want body hidden and title shown", shown)
	}
}

func TestKBGetUnknownIDIsPermanent(t *testing.T) {
	reg := registry(t)
	env, _ := call(t, reg, context.Background(), "kb_get", `{"id": "returns"}`)
	if env.OK || env.Error == nil {
		t.Fatalf("envelope %+v, want an error", env)
	}
	e := env.Error
	if e.Type != tools.ErrPermanent || e.Retryable || e.PartialSideEffects {
		t.Errorf("error %+v, want PERMANENT, not retryable, no side effects", e)
	}
	if !strings.Contains(e.Message, `no document with id "returns"`) || !strings.Contains(e.Message, "kb_search") {
		t.Errorf("message %q", e.Message)
	}
}

func TestHandlersHonourCancelledContext(t *testing.T) {
	reg := registry(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, args := range map[string]string{"kb_search": `{"query": "coffee"}`, "kb_get": `{"id": "shipping"}`} {
		env, _ := call(t, reg, ctx, name, args)
		if env.OK || env.Error == nil || env.Error.Type != tools.ErrTransient || !env.Error.Retryable {
			t.Errorf("%s with cancelled ctx: %+v", name, env)
		}
	}
}

func TestHandlersRefuseUndecodableArgs(t *testing.T) {
	reg := registry(t)
	for _, name := range []string{"kb_search", "kb_get"} {
		tool, _ := reg.Lookup(name)
		env := tool.Handler.Handle(context.Background(), tools.Call{Args: json.RawMessage(`[1]`)})
		if env.OK || env.Error.Type != tools.ErrValidation || env.Error.PartialSideEffects {
			t.Errorf("%s: %+v", name, env)
		}
	}
}
