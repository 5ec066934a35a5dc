package geminilive_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/geminilive"
)

// kbSearchSchema is kb_search's arguments as Gemini's native Schema, as the
// registry renders them.
var kbSearchSchema = &genai.Schema{Type: genai.TypeObject, Required: []string{"query"},
	Properties: map[string]*genai.Schema{"query": {Type: genai.TypeString, MaxLength: genai.Ptr[int64](500)}}}

var kbSearch = transport.ToolDecl{
	Name:        "kb_search",
	Description: "Search the knowledge base",
	Parameters: map[string]any{
		"type":       "object",
		"properties": map[string]any{"query": map[string]any{"type": "string", "maxLength": 500.0}},
		"required":   []any{"query"},
	},
	ParametersOpenAPI: mustJSON(kbSearchSchema),
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestSetupCarriesTheLiveConfig(t *testing.T) {
	f := startFake(t)
	m := newModel(t, f.addr, geminilive.Options{Voice: "Kore", TriggerTokens: 25000, TargetTokens: 12500})
	connect(t, m, transport.LiveConfig{System: "Be brief.", Tools: []transport.ToolDecl{kbSearch}})
	setup := f.session(t).Setup

	if setup.Model != testModel {
		t.Errorf("model = %q, want %q", setup.Model, testModel)
	}
	gc := setup.GenerationConfig
	if gc == nil || !reflect.DeepEqual(gc.ResponseModalities, []genai.Modality{genai.ModalityAudio}) {
		t.Errorf("generationConfig = %+v, want responseModalities [AUDIO]", gc)
	}
	if gc == nil || gc.SpeechConfig == nil || gc.SpeechConfig.VoiceConfig == nil ||
		gc.SpeechConfig.VoiceConfig.PrebuiltVoiceConfig == nil ||
		gc.SpeechConfig.VoiceConfig.PrebuiltVoiceConfig.VoiceName != "Kore" {
		t.Errorf("speech config missing the voice Kore: %s", setup.Raw)
	}
	if si := setup.SystemInstruction; si == nil || len(si.Parts) != 1 || si.Parts[0].Text != "Be brief." {
		t.Errorf("system instruction = %s, want \"Be brief.\"", setup.Raw)
	}
	decls := setup.FunctionDeclarations()
	if len(decls) != 1 || decls[0].Name != "kb_search" || decls[0].Description != "Search the knowledge base" {
		t.Fatalf("function declarations = %s, want kb_search", setup.Raw)
	}
	// Voice declares Gemini-native schemas ("parameters"), never the JSON
	// Schema text models get.
	if !reflect.DeepEqual(decls[0].Parameters, kbSearchSchema) {
		t.Errorf("parameters = %s, want the native schema %s", setup.Raw, kbSearch.ParametersOpenAPI)
	}
	if decls[0].ParametersJsonSchema != nil || decls[0].Behavior != "" {
		t.Errorf("declaration sets parametersJsonSchema or behavior: %s", setup.Raw)
	}
	if !strings.Contains(string(setup.Raw), `"parameters":{`) || !strings.Contains(string(setup.Raw), `"type":"OBJECT"`) {
		t.Errorf("setup does not carry the native schema on the wire: %s", setup.Raw)
	}
	if setup.InputAudioTranscription == nil || setup.OutputAudioTranscription == nil {
		t.Errorf("transcription not requested both ways: %s", setup.Raw)
	}
	cw := setup.ContextWindowCompression
	if cw == nil || cw.TriggerTokens == nil || *cw.TriggerTokens != 25000 ||
		cw.SlidingWindow == nil || cw.SlidingWindow.TargetTokens == nil || *cw.SlidingWindow.TargetTokens != 12500 {
		t.Errorf("compression = %s, want trigger 25000, sliding window to 12500", setup.Raw)
	}
	if setup.SessionResumption == nil || setup.ResumeHandle() != "" {
		t.Errorf("sessionResumption = %+v, want {} (updates on, new session)", setup.SessionResumption)
	}
	if strings.Contains(string(setup.Raw), "behavior") {
		t.Errorf("setup carries a behavior: %s", setup.Raw)
	}
}

// A tool whose schema Gemini's native Schema cannot express is still
// declared, with its JSON Schema.
func TestSetupDeclaresAToolWithoutANativeSchemaByItsJSONSchema(t *testing.T) {
	f := startFake(t)
	m := newModel(t, f.addr, geminilive.Options{})
	odd := transport.ToolDecl{Name: "odd", Description: "Takes one of two shapes.",
		Parameters: map[string]any{"type": "object", "oneOf": []any{map[string]any{"required": []any{"a"}}}}}
	connect(t, m, transport.LiveConfig{Tools: []transport.ToolDecl{kbSearch, odd}})
	decls := f.session(t).Setup.FunctionDeclarations()
	if len(decls) != 2 || decls[1].Name != "odd" {
		t.Fatalf("declarations %+v, want kb_search and odd", decls)
	}
	if decls[0].Parameters == nil || decls[0].ParametersJsonSchema != nil {
		t.Errorf("kb_search: %+v, want its native schema", decls[0])
	}
	if decls[1].Parameters != nil || !reflect.DeepEqual(decls[1].ParametersJsonSchema, odd.Parameters) {
		t.Errorf("odd: %+v, want its JSON Schema", decls[1])
	}
}

func TestSetupDefaults(t *testing.T) {
	cases := []struct {
		name        string
		opts        geminilive.Options
		compression bool
	}{
		{"compression on with the server's thresholds", geminilive.Options{}, true},
		{"compression off", geminilive.Options{NoCompression: true}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := startFake(t)
			connect(t, newModel(t, f.addr, tc.opts), transport.LiveConfig{})
			setup := f.session(t).Setup
			var raw map[string]json.RawMessage
			must(t, json.Unmarshal(setup.Raw, &raw))
			cw, on := raw["contextWindowCompression"]
			if on != tc.compression {
				t.Fatalf("contextWindowCompression present = %v, want %v: %s", on, tc.compression, setup.Raw)
			}
			if on && string(cw) != `{"slidingWindow":{}}` {
				t.Errorf("contextWindowCompression = %s, want a sliding window with the server's defaults", cw)
			}
			for _, absent := range []string{"tools", "systemInstruction", "speechConfig"} {
				if strings.Contains(string(setup.Raw), absent) {
					t.Errorf("setup has %s although nothing asked for it: %s", absent, setup.Raw)
				}
			}
			if _, ok := raw["sessionResumption"]; !ok {
				t.Errorf("setup lacks sessionResumption: %s", setup.Raw)
			}
		})
	}
}

func TestHistorySeedsOneClientContentOfUserAndModelText(t *testing.T) {
	f := startFake(t)
	m := newModel(t, f.addr, geminilive.Options{})
	history := []transport.Entry{
		{Role: transport.RoleUser, Text: "how do refunds work?"},
		{Role: transport.RoleModel, Text: "Let me check.", Calls: []transport.FunctionCall{
			{ID: "fc-1", Name: "kb_search", Args: map[string]any{"query": "refunds"}}}},
		{Role: transport.RoleTool, Results: []transport.FunctionResult{
			{ID: "fc-1", Name: "kb_search", Response: map[string]any{"output": "5 days"}}}},
		{Role: transport.RoleModel, Text: "Refunds take five days."},
		{Role: transport.RoleUser, Text: "thanks"},
	}
	s := connect(t, m, transport.LiveConfig{History: history})
	fs := f.session(t)

	seed := clientEvent(t, fs)
	if seed.Kind != fakegemini.EventClientContent || seed.TurnComplete {
		t.Fatalf("first message = %s (turnComplete %v), want clientContent with turnComplete false", seed.Kind, seed.TurnComplete)
	}
	type turn struct{ role, text string }
	var got []turn
	for _, c := range seed.Turns {
		for _, p := range c.Parts {
			if p.FunctionCall != nil || p.FunctionResponse != nil {
				t.Errorf("seed carries a function part: %+v", p)
			}
			got = append(got, turn{c.Role, p.Text})
		}
	}
	want := []turn{
		{"user", "how do refunds work?"},
		{"model", "Let me check."}, {"model", "Refunds take five days."},
		{"user", "thanks"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("seeded turns = %v, want %v", got, want)
	}
	if len(seed.Turns) != 3 {
		t.Errorf("seed has %d contents, want 3 alternating user/model", len(seed.Turns))
	}

	// The seed is one message: the next thing the fake hears is the user.
	must(t, s.SendText("and exchanges?"))
	next := clientEvent(t, fs)
	if next.Kind != fakegemini.EventClientContent || !next.TurnComplete || next.UserText() != "and exchanges?" {
		t.Errorf("second message = %+v, want the user's text as a complete turn", next)
	}
}

func TestNoHistoryMeansNoSeed(t *testing.T) {
	f := startFake(t)
	s := connect(t, newModel(t, f.addr, geminilive.Options{}), transport.LiveConfig{
		History: []transport.Entry{{Role: transport.RoleTool, Results: []transport.FunctionResult{{ID: "x", Name: "kb_search"}}}},
	})
	fs := f.session(t)
	must(t, s.SendAudioEnd())
	if ev := clientEvent(t, fs); ev.Kind != fakegemini.EventAudioStreamEnd {
		t.Errorf("first message = %s, want the audioStreamEnd (a history without text seeds nothing)", ev.Kind)
	}
}

func TestBaseURLMapsRESTBaseToWebSocket(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8090/":  "ws://127.0.0.1:8090/",
		"https://gemini.example/": "wss://gemini.example/",
		"ws://h/":                 "ws://h/",
		"":                        "",
	} {
		if got := geminilive.BaseURL(in); got != want {
			t.Errorf("BaseURL(%q) = %q, want %q", in, got, want)
		}
	}
}
