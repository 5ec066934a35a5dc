package tools_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"go.uber.org/goleak"

	"github.com/turnstile-gw/turnstile/tools"
)

// Dependencies start process-lifetime workers in their init (bleve's
// analysis queue, opencensus under genai); only goroutines started after
// that count as leaks.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}

const echoSchema = `{
  "name": "echo",
  "category": "utility",
  "modes": ["text"],
  "redact": {"args": ["text"], "result": []},
  "parameters": {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": false
  }
}`

const echoGuide = "# echo\n\nRepeats the text back.\n"

var noop = tools.HandlerFunc(func(context.Context, tools.Call) tools.Envelope { return tools.OK(nil) })

// toolFS builds a MapFS with one folder per name; schema/guide of "" leave
// the file out.
func toolFS(files map[string][2]string) fstest.MapFS {
	fsys := fstest.MapFS{}
	for name, f := range files {
		if f[0] != "" {
			fsys[name+"/schema.json"] = &fstest.MapFile{Data: []byte(f[0])}
		}
		if f[1] != "" {
			fsys[name+"/guide.md"] = &fstest.MapFile{Data: []byte(f[1])}
		}
		if f[0] == "" && f[1] == "" {
			fsys[name+"/notes.txt"] = &fstest.MapFile{Data: []byte("x")}
		}
	}
	return fsys
}

func echoWith(old, new string) string {
	s := strings.Replace(echoSchema, old, new, 1)
	if s == echoSchema {
		panic("replacement not found: " + old)
	}
	return s
}

func TestLoadValidTool(t *testing.T) {
	reg, err := tools.Load(toolFS(map[string][2]string{"echo": {echoSchema, echoGuide}}), map[string]tools.Handler{"echo": noop})
	if err != nil {
		t.Fatal(err)
	}
	tool, ok := reg.Lookup("echo")
	if !ok {
		t.Fatal("echo not registered")
	}
	if tool.Description != "Repeats the text back." {
		t.Errorf("Description = %q, want the guide's first non-heading line", tool.Description)
	}
	if tool.Guide != echoGuide {
		t.Errorf("Guide = %q", tool.Guide)
	}
	if tool.Timeout().Milliseconds() != 10000 || tool.SoftLatencyIn("text") != 0 || tool.SoftLatencyIn("voice") != tools.VoiceSoftLatency {
		t.Errorf("defaults for a utility tool: timeout %v soft %v/%v, want 10s, none in text and 1s in voice", tool.Timeout(),
			tool.SoftLatencyIn("text"), tool.SoftLatencyIn("voice"))
	}
	if tool.Handler == nil {
		t.Error("Handler not set")
	}
	if _, ok := reg.Lookup("nope"); ok {
		t.Error("Lookup of an unknown tool reported found")
	}
}

func TestLoadReportsEachProblem(t *testing.T) {
	cases := []struct {
		name     string
		files    map[string][2]string
		handlers []string
		tool     string // the tool the error must name
		file     string // the file it must name ("" for none)
		want     string // a phrase of the message
	}{
		{"invalid JSON", map[string][2]string{"echo": {`{"name": "echo",`, echoGuide}}, []string{"echo"},
			"echo", "schema.json", "invalid JSON"},
		{"trailing data", map[string][2]string{"echo": {echoSchema + "{}", echoGuide}}, []string{"echo"},
			"echo", "schema.json", "invalid JSON"},
		{"unknown category", map[string][2]string{"echo": {echoWith(`"utility"`, `"fetch"`), echoGuide}}, []string{"echo"},
			"echo", "schema.json", "/category"},
		{"empty modes", map[string][2]string{"echo": {echoWith(`["text"]`, `[]`), echoGuide}}, []string{"echo"},
			"echo", "schema.json", "/modes"},
		{"unknown mode", map[string][2]string{"echo": {echoWith(`["text"]`, `["video"]`), echoGuide}}, []string{"echo"},
			"echo", "schema.json", "/modes/0"},
		{"no redaction allow-list", map[string][2]string{"echo": {echoWith(`"redact": {"args": ["text"], "result": []},`, ``), echoGuide}}, []string{"echo"},
			"echo", "schema.json", "redact"},
		{"redaction without result list", map[string][2]string{"echo": {echoWith(`, "result": []`, ``), echoGuide}}, []string{"echo"},
			"echo", "schema.json", "result"},
		{"redaction of unknown argument", map[string][2]string{"echo": {echoWith(`"args": ["text"]`, `"args": ["txt"]`), echoGuide}}, []string{"echo"},
			"echo", "schema.json", `"txt"`},
		{"zero timeout", map[string][2]string{"echo": {echoWith(`"category"`, `"timeoutMs": 0, "category"`), echoGuide}}, []string{"echo"},
			"echo", "schema.json", "/timeoutMs"},
		{"unknown manifest key", map[string][2]string{"echo": {echoWith(`"category"`, `"retries": 3, "category"`), echoGuide}}, []string{"echo"},
			"echo", "schema.json", "retries"},
		{"parameters not an object schema", map[string][2]string{"echo": {echoWith(`"type": "object"`, `"type": "array"`), echoGuide}}, []string{"echo"},
			"echo", "schema.json", "/parameters/type"},
		{"parameters not valid JSON Schema", map[string][2]string{"echo": {echoWith(`{"type": "string"}`, `{"type": "strin"}`), echoGuide}}, []string{"echo"},
			"echo", "schema.json", "not a valid JSON Schema"},
		{"negative minLength", map[string][2]string{"echo": {echoWith(`{"type": "string"}`, `{"type": "string", "minLength": -1}`), echoGuide}}, []string{"echo"},
			"echo", "schema.json", "not a valid JSON Schema"},
		{"camelCase argument", map[string][2]string{"echo": {echoWith(`{"text": {"type": "string"}}`, `{"text": {"type": "string"}, "maxLen": {"type": "integer"}}`), echoGuide}}, []string{"echo"},
			"echo", "schema.json", "maxLen"},
		{"external $ref", map[string][2]string{"echo": {echoWith(`{"type": "string"}`, `{"$ref": "file:///etc/passwd"}`), echoGuide}}, []string{"echo"},
			"echo", "schema.json", "not a valid JSON Schema"},
		{"name mismatch", map[string][2]string{"echo": {echoWith(`"name": "echo"`, `"name": "echo2"`), echoGuide}}, []string{"echo"},
			"echo", "schema.json", `does not match its folder`},
		{"bad name", map[string][2]string{"Echo": {echoWith(`"name": "echo"`, `"name": "Echo"`), echoGuide}}, []string{"Echo"},
			"Echo", "schema.json", "/name"},
		{"missing schema", map[string][2]string{"echo": {"", echoGuide}}, []string{"echo"},
			"echo", "schema.json", "read"},
		{"missing guide", map[string][2]string{"echo": {echoSchema, ""}}, []string{"echo"},
			"echo", "guide.md", "read"},
		{"guide without summary", map[string][2]string{"echo": {echoSchema, "# echo\n\n## Usage\n"}}, []string{"echo"},
			"echo", "guide.md", "summary"},
		{"manifest without handler", map[string][2]string{"echo": {echoSchema, echoGuide}}, nil,
			"echo", "", "no handler"},
		{"handler without manifest", map[string][2]string{"echo": {echoSchema, echoGuide}}, []string{"echo", "shout"},
			"shout", "", "no manifest"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			handlers := map[string]tools.Handler{}
			for _, h := range c.handlers {
				handlers[h] = noop
			}
			reg, err := tools.Load(toolFS(c.files), handlers)
			if err == nil {
				t.Fatalf("Load succeeded (%d tools), want an error", len(reg.Tools()))
			}
			if !namesProblem(err, c.tool, c.file, c.want) {
				t.Fatalf("no *LoadError for tool %q file %q containing %q in:\n%v", c.tool, c.file, c.want, err)
			}
		})
	}
}

func TestLoadReportsAllProblemsAtOnce(t *testing.T) {
	fsys := toolFS(map[string][2]string{
		"echo":  {echoWith(`"utility"`, `"fetch"`), ""},
		"other": {`not json`, echoGuide},
	})
	_, err := tools.Load(fsys, map[string]tools.Handler{"echo": noop, "ghost": noop})
	if err == nil {
		t.Fatal("Load succeeded")
	}
	for _, p := range [][3]string{
		{"echo", "schema.json", "/category"},
		{"echo", "guide.md", "read"},
		{"other", "schema.json", "invalid JSON"},
		{"other", "", "no handler"},
		{"ghost", "", "no manifest"},
	} {
		if !namesProblem(err, p[0], p[1], p[2]) {
			t.Errorf("missing problem %v in:\n%v", p, err)
		}
	}
	if !errors.Is(err, tools.ErrNoManifest) || !errors.Is(err, tools.ErrNoHandler) {
		t.Errorf("joined error should match ErrNoManifest and ErrNoHandler")
	}
}

func TestLoadRefusesNilHandler(t *testing.T) {
	_, err := tools.Load(toolFS(map[string][2]string{"echo": {echoSchema, echoGuide}}), map[string]tools.Handler{"echo": nil})
	if err == nil || !namesProblem(err, "echo", "", "nil") {
		t.Fatalf("err = %v, want a nil-handler problem", err)
	}
}

func TestLoadSkipsFilesAndHiddenFolders(t *testing.T) {
	fsys := toolFS(map[string][2]string{"echo": {echoSchema, echoGuide}})
	fsys["README.md"] = &fstest.MapFile{Data: []byte("# tools")}
	fsys[".git/config"] = &fstest.MapFile{Data: []byte("x")}
	fsys["_drafts/x/schema.json"] = &fstest.MapFile{Data: []byte("x")}
	reg, err := tools.Load(fsys, map[string]tools.Handler{"echo": noop})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(reg.Tools()); n != 1 {
		t.Fatalf("%d tools, want 1", n)
	}
}

func TestToolsSortedAndForMode(t *testing.T) {
	voice := strings.ReplaceAll(echoWith(`["text"]`, `["voice", "text"]`), `"echo"`, `"alpha"`)
	voiceOnly := strings.ReplaceAll(echoWith(`["text"]`, `["voice"]`), `"echo"`, `"zulu"`)
	fsys := toolFS(map[string][2]string{"echo": {echoSchema, echoGuide}, "alpha": {voice, echoGuide}, "zulu": {voiceOnly, echoGuide}})
	reg, err := tools.Load(fsys, map[string]tools.Handler{"echo": noop, "alpha": noop, "zulu": noop})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(reg.Tools()); got != "alpha,echo,zulu" {
		t.Errorf("Tools() = %s", got)
	}
	if got := names(reg.ForMode(tools.ModeText)); got != "alpha,echo" {
		t.Errorf("ForMode(text) = %s", got)
	}
	if got := names(reg.ForMode(tools.ModeVoice)); got != "alpha,zulu" {
		t.Errorf("ForMode(voice) = %s", got)
	}
	if got := names(reg.ForMode("fax")); got != "" {
		t.Errorf("ForMode(fax) = %s", got)
	}
}

func TestVersionFollowsContent(t *testing.T) {
	load := func(files map[string][2]string) string {
		t.Helper()
		handlers := map[string]tools.Handler{}
		for n := range files {
			handlers[n] = noop
		}
		reg, err := tools.Load(toolFS(files), handlers)
		if err != nil {
			t.Fatal(err)
		}
		return reg.Version()
	}
	base := load(map[string][2]string{"echo": {echoSchema, echoGuide}})
	if len(base) != 16 || strings.Trim(base, "0123456789abcdef") != "" {
		t.Fatalf("Version() = %q, want 16 hex characters", base)
	}
	if again := load(map[string][2]string{"echo": {echoSchema, echoGuide}}); again != base {
		t.Errorf("same content, different versions: %s vs %s", base, again)
	}
	changed := map[string]map[string][2]string{
		"guide edited":    {"echo": {echoSchema, echoGuide + "More.\n"}},
		"schema edited":   {"echo": {echoWith(`"utility"`, `"action"`), echoGuide}},
		"whitespace only": {"echo": {echoSchema + "\n", echoGuide}},
		"tool added":      {"echo": {echoSchema, echoGuide}, "more": {strings.ReplaceAll(echoSchema, `"echo"`, `"more"`), echoGuide}},
	}
	seen := map[string]string{base: "base"}
	for what, files := range changed {
		v := load(files)
		if prev, dup := seen[v]; dup {
			t.Errorf("%s: version %s equals that of %s", what, v, prev)
		}
		seen[v] = what
	}
}

func namesProblem(err error, tool, file, phrase string) bool {
	for _, e := range flatten(err) {
		var le *tools.LoadError
		if errors.As(e, &le) && le.Tool == tool && le.File == file && strings.Contains(le.Error(), phrase) {
			return true
		}
	}
	return false
}

func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

func names(ts []*tools.Tool) string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return strings.Join(out, ",")
}
