package gateway_test

import (
	"strings"
	"testing"

	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
)

// TURNSTILE_TOOL_CHOICE reaches Gemini as functionCallingConfig.mode on
// every text request, through the real genai SDK.
func TestToolChoiceIsSentToGeminiOnEveryTextRequest(t *testing.T) {
	for choice, mode := range map[string]genai.FunctionCallingConfigMode{
		"auto": genai.FunctionCallingConfigModeAuto, "required": genai.FunctionCallingConfigModeAny,
		"none": genai.FunctionCallingConfigModeNone,
	} {
		t.Run(choice, func(t *testing.T) {
			brain := fakegemini.NewScript(callStep(searchCall("shipping")), textStep("Two days."))
			cfg := defaultTestConfig(t)
			cfg.ToolChoice = choice
			g := startGateway(t, cfg, brain)
			c := g.dial("", nil)
			c.start(nil)
			c.ask("how long does shipping take?")
			reqs := brain.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d model requests, want 2", len(reqs))
			}
			for i, req := range reqs {
				if len(req.Tools) == 0 || req.ToolConfig == nil || req.ToolConfig.FunctionCallingConfig == nil ||
					req.ToolConfig.FunctionCallingConfig.Mode != mode {
					t.Errorf("request %d: toolConfig %+v, want functionCallingConfig.mode %s", i, req.ToolConfig, mode)
				}
			}
		})
	}
}

// With tool choice none, the offline demo model (which honours the mode as
// Gemini does) answers without calling a tool.
func TestToolChoiceNoneKeepsTheGeminiDemoFromCallingTools(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.ToolChoice = "none"
	g := startGateway(t, cfg, fakegemini.NewDemo())
	c := g.dial("", nil)
	c.start(nil)
	evs := c.ask("How long does shipping take?")
	if calls := ofType(evs, "tool.call"); len(calls) != 0 {
		t.Fatalf("tool calls with tool choice none: %v", calls)
	}
	if done := ofType(evs, "text.done"); len(done) != 1 || !strings.Contains(done[0].str("text"), "tools are switched off") {
		t.Fatalf("text.done = %v", done)
	}
}
