package fakegemini

import (
	"reflect"
	"strings"
	"testing"

	"google.golang.org/genai"
)

// gatewayTools declares tools the way the gateway does, JSON Schema and all.
var gatewayTools = []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{
	{Name: "kb_search", ParametersJsonSchema: map[string]any{"type": "object"}},
	{Name: "create_ticket", ParametersJsonSchema: map[string]any{"type": "object"}},
}}}

// demoCallTurn sends contents with the gateway's tools declared.
func demoCallTurn(t *testing.T, c *genai.Client, contents []*genai.Content) (string, []*genai.FunctionCall, *genai.Content) {
	t.Helper()
	return demoTurnWith(t, c, contents, &genai.GenerateContentConfig{Tools: gatewayTools})
}

func TestDemoCallsAnyDeclaredToolAndSummarisesTheResult(t *testing.T) {
	cases := []struct {
		name     string
		typed    string
		tool     string
		args     map[string]any
		response map[string]any
		says     string
	}{
		{"with arguments", `/call create_ticket {"title":"x","priority":2}`, "create_ticket",
			map[string]any{"title": "x", "priority": 2.0}, map[string]any{"output": map[string]any{"id": "T-1"}},
			`The create_ticket tool succeeded: {"id":"T-1"}`},
		{"without arguments", "/call create_ticket", "create_ticket", map[string]any{},
			map[string]any{"output": "created"}, "The create_ticket tool succeeded: created"},
		{"a failing tool", `/call create_ticket {"title":"x"}`, "create_ticket", map[string]any{"title": "x"},
			map[string]any{"error": map[string]any{"type": "FORBIDDEN", "message": "tickets are closed today"}},
			"The create_ticket tool failed: tickets are closed today"},
		{"kb_search is summarised, not followed up", `/call kb_search {"query":"refunds"}`, "kb_search",
			map[string]any{"query": "refunds"}, map[string]any{"output": map[string]any{"results": []any{}}},
			`The kb_search tool succeeded: {"results":[]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, base := startServer(t, NewDemo())
			c := newClient(t, base)
			contents := genai.Text(tc.typed)
			_, calls, model := demoCallTurn(t, c, contents)
			if len(calls) != 1 || calls[0].Name != tc.tool || !reflect.DeepEqual(calls[0].Args, tc.args) {
				t.Fatalf("calls = %+v, want %s%v", calls, tc.tool, tc.args)
			}
			contents = append(contents, model, toolResult(tc.tool, tc.response))
			text, calls, _ := demoCallTurn(t, c, contents)
			if len(calls) != 0 || text != tc.says {
				t.Errorf("answer %q with %d calls, want %q", text, len(calls), tc.says)
			}
		})
	}
}

func TestDemoRefusesACallItCannotMake(t *testing.T) {
	_, base := startServer(t, NewDemo())
	c := newClient(t, base)
	for typed, says := range map[string]string{
		`/call delete_everything {}`:   "I can't call delete_everything: it is not declared in this session. Declared tools: kb_search, create_ticket.",
		`/call create_ticket {"title"`: "I couldn't read the arguments for create_ticket",
		`/call create_ticket [1,2]`:    "I couldn't read the arguments for create_ticket",
		`/call`:                        "Tell me which tool to call",
	} {
		text, calls, _ := demoCallTurn(t, c, genai.Text(typed))
		if len(calls) != 0 || !strings.HasPrefix(text, says) {
			t.Errorf("%s: answer %q with %d calls, want %q", typed, text, len(calls), says)
		}
	}
	// Without declared tools at all.
	text, calls, _ := demoTurn(t, c, genai.Text("/call create_ticket"))
	if len(calls) != 0 || text != "I can't call create_ticket: no tools are declared in this session." {
		t.Errorf("answer %q with %d calls, want the no-tools message", text, len(calls))
	}
}

func TestLiveDemoCallsAnyDeclaredToolWhenTyped(t *testing.T) {
	cfg := *demoConfig
	cfg.Tools = gatewayTools
	cases := []struct {
		name     string
		typed    string
		tool     string
		response map[string]any
		says     string
	}{
		{"success", `/call create_ticket {"title":"x"}`, "create_ticket", map[string]any{"output": map[string]any{"id": "T-1"}},
			`The create_ticket tool succeeded: {"id":"T-1"}`},
		{"failure", "/call create_ticket", "create_ticket", map[string]any{"error": "tickets are closed"},
			"The create_ticket tool failed: tickets are closed"},
		{"not declared", "/call launch_rocket", "", nil, "I can't call launch_rocket: it is not declared in this session."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, base := startLive(t, NewLiveDemo())
			Strict(t, srv)
			c := connectLive(t, base, &cfg)
			c.skipSetupComplete(t)
			if err := typed(tc.typed)(c.sess); err != nil {
				t.Fatalf("send: %v", err)
			}
			if tc.tool != "" {
				msgs := c.until(t, func(m *genai.LiveServerMessage) bool { return isToolCall(m) || isTurnComplete(m) })
				tcm := msgs[len(msgs)-1].ToolCall
				if tcm == nil || len(tcm.FunctionCalls) != 1 || tcm.FunctionCalls[0].Name != tc.tool {
					t.Fatalf("want a %s call, got %s", tc.tool, describe(msgs))
				}
				fc := tcm.FunctionCalls[0]
				if err := c.sess.SendToolResponse(genai.LiveToolResponseInput{FunctionResponses: []*genai.FunctionResponse{{
					ID: fc.ID, Name: fc.Name, Response: tc.response}}}); err != nil {
					t.Fatal(err)
				}
			}
			h := summarize(t, c.until(t, isTurnComplete))
			if !strings.HasPrefix(h.output, tc.says) || len(h.audio) == 0 {
				t.Errorf("spoke %v saying %q, want audio saying %q", pcmDuration(h.audio), h.output, tc.says)
			}
		})
	}
}
