package tools_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/tools"
)

// builtDoc mirrors tool_registry.json as a consumer would read it.
type builtDoc struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	BuiltAt string `json:"builtAt"`
	Tools   []struct {
		Name                 string           `json:"name"`
		Description          string           `json:"description"`
		Category             string           `json:"category"`
		Modes                []string         `json:"modes"`
		RequiresConfirmation bool             `json:"requiresConfirmation"`
		Terminal             bool             `json:"terminal"`
		EndsSession          bool             `json:"endsSession"`
		Sensitive            bool             `json:"sensitive"`
		TrustedOutput        bool             `json:"trustedOutput"`
		SoftLatencyMs        map[string]int64 `json:"softLatencyMs"`
		TimeoutMs            int64            `json:"timeoutMs"`
		Redact               tools.Redact     `json:"redact"`
		Parameters           json.RawMessage  `json:"parameters"`
		Providers            struct {
			OpenAI map[string]any `json:"openai"`
			Gemini struct {
				Parameters           map[string]any `json:"parameters"`
				ParametersJSONSchema map[string]any `json:"parametersJsonSchema"`
			} `json:"gemini"`
		} `json:"providers"`
		Guide string `json:"guide"`
	} `json:"tools"`
}

func decodeBuilt(t *testing.T, b []byte) builtDoc {
	t.Helper()
	var d builtDoc
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("tool_registry.json does not decode: %v\n%s", err, b)
	}
	return d
}

func TestBuildManifestDescribesEveryTool(t *testing.T) {
	reg := builtinRegistry(t)
	built := time.Date(2030, 1, 2, 4, 5, 6, 0, time.FixedZone("CET", 3600))
	b, err := reg.BuildManifest("abc1234", built)
	if err != nil {
		t.Fatal(err)
	}
	d := decodeBuilt(t, b)
	if d.Version != reg.Version() || d.Commit != "abc1234" || d.BuiltAt != "2030-01-02T03:05:06Z" {
		t.Errorf("header = %q %q %q", d.Version, d.Commit, d.BuiltAt)
	}
	if len(d.Tools) != len(reg.Tools()) {
		t.Fatalf("%d tools in the document, %d registered", len(d.Tools), len(reg.Tools()))
	}
	for i, tool := range reg.Tools() {
		got := d.Tools[i]
		if got.Name != tool.Name {
			t.Fatalf("tool %d is %s, want %s (name order)", i, got.Name, tool.Name)
		}
		switch {
		case got.Description != tool.Description || got.Guide != tool.Guide:
			t.Errorf("%s: description/guide differ", tool.Name)
		case got.Category != string(tool.Category) || fmt.Sprint(got.Modes) != fmt.Sprint(tool.Modes):
			t.Errorf("%s: category/modes = %s %v", tool.Name, got.Category, got.Modes)
		case got.TimeoutMs != tool.Timeout().Milliseconds() ||
			got.SoftLatencyMs["text"] != tool.SoftLatencyIn("text").Milliseconds() ||
			got.SoftLatencyMs["voice"] != tool.SoftLatencyIn("voice").Milliseconds():
			t.Errorf("%s: latencies = %d %v", tool.Name, got.TimeoutMs, got.SoftLatencyMs)
		case strings.Join(got.Redact.Args, ",") != strings.Join(tool.Redact.Args, ","):
			t.Errorf("%s: redact = %+v", tool.Name, got.Redact)
		}
		var params map[string]any
		if err := json.Unmarshal(got.Parameters, &params); err != nil || params["$schema"] == nil {
			t.Errorf("%s: parameters should be the canonical schema with $schema: %s", tool.Name, got.Parameters)
		}
		if fn, _ := got.Providers.OpenAI["function"].(map[string]any); fn["name"] != tool.Name {
			t.Errorf("%s: providers.openai = %v", tool.Name, got.Providers.OpenAI)
		}
		if got.Providers.Gemini.Parameters["type"] != "OBJECT" {
			t.Errorf("%s: providers.gemini.parameters = %v, want a Gemini Schema with uppercase types", tool.Name, got.Providers.Gemini.Parameters)
		}
		if js := got.Providers.Gemini.ParametersJSONSchema; js["type"] != "object" || js["$schema"] != nil {
			t.Errorf("%s: providers.gemini.parametersJsonSchema = %v", tool.Name, js)
		}
	}
	again, err := reg.BuildManifest("abc1234", built)
	if err != nil || !bytes.Equal(again, b) {
		t.Error("two builds of the same registry differ")
	}
	if !bytes.HasPrefix(b, []byte("{\n  \"version\": ")) || !bytes.HasSuffix(b, []byte("}\n")) {
		t.Errorf("document is not indented or lacks its final newline:\n%.80s", b)
	}
}

func TestBuildManifestShowsPolicyOverrides(t *testing.T) {
	reg := builtinRegistry(t)
	withPolicy, err := reg.WithPolicy(loadPolicy(t, "p.yaml", samplePolicyYAML))
	if err != nil {
		t.Fatal(err)
	}
	b, err := withPolicy.BuildManifest("c", time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	d := decodeBuilt(t, b)
	if d.Version == reg.Version() || d.Version != withPolicy.Version() {
		t.Errorf("version = %s; registry %s, with policy %s", d.Version, reg.Version(), withPolicy.Version())
	}
	for _, tool := range d.Tools {
		if tool.Name == "kb_search" && (strings.Join(tool.Modes, ",") != "text" || !tool.RequiresConfirmation || tool.TimeoutMs != 3000) {
			t.Errorf("kb_search in the document ignores the policy: %+v", tool)
		}
	}
}

func TestBuildManifestKeepsMarkdownReadable(t *testing.T) {
	guide := "# echo\n\nRepeats <text> back & forth.\n"
	reg, err := tools.Load(toolFS(map[string][2]string{"echo": {echoSchema, guide}}), map[string]tools.Handler{"echo": noop})
	if err != nil {
		t.Fatal(err)
	}
	b, err := reg.BuildManifest("c", time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"description": "Repeats <text> back & forth."`)) {
		t.Errorf("HTML-escaped or missing description:\n%s", b)
	}
}

func TestBuildManifestRefusesToolsGeminiCannotRender(t *testing.T) {
	oneOf := echoWith(`{"text": {"type": "string"}}`, `{"text": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}`)
	reg, err := tools.Load(toolFS(map[string][2]string{"echo": {oneOf, echoGuide}}), map[string]tools.Handler{"echo": noop})
	if err != nil {
		t.Fatal(err)
	}
	_, err = reg.BuildManifest("c", time.Unix(0, 0))
	if err == nil || !strings.Contains(err.Error(), "tool echo: gemini schema: at /properties/text: \"oneOf\"") {
		t.Fatalf("err = %v, want one naming the tool and the construct", err)
	}
}
