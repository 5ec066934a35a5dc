package protocol

import "testing"

// Every server event encodes to the bytes the protocol has always had: the
// type tag first, then the fields in order, HTML characters escaped, empty
// optional fields left out. The expected lines are what the codec wrote
// when each event still carried a hand-set Type field.
func TestEventsEncodeAsTheyAlwaysHave(t *testing.T) {
	args := map[string]any{"q": "a<b & c", "n": 2}
	confirm := ConfirmRequest{Turn: 2, Token: "t", Tool: "x", Args: args, ExpiresAt: "2026-01-01T00:00:00Z"}
	for _, c := range []struct {
		ev   Event
		want string
	}{
		{SessionReady{SessionID: "s1", ResumeToken: "r1", Mode: ModeVoice, Resumed: true, RegistryVersion: "v1", Turn: 3,
			Model: ModelInfo{Name: "m", Offline: true}, History: []HistoryItem{{Role: "user", Text: "hi", Turn: 1}},
			PendingConfirmations: []ConfirmRequest{confirm},
			Tools:                []ToolInfo{{Name: "kb_search", Modes: []Mode{"text"}}}},
			`{"type":"session.ready","sessionId":"s1","resumeToken":"r1","mode":"voice","resumed":true,"registryVersion":"v1","turn":3,"model":{"name":"m","offline":true},"history":[{"role":"user","text":"hi","turn":1}],"pendingConfirmations":[{"type":"confirm.request","turn":2,"token":"t","tool":"x","args":{"n":2,"q":"a\u003cb \u0026 c"},"expiresAt":"2026-01-01T00:00:00Z"}],"tools":[{"name":"kb_search","modes":["text"],"requiresConfirmation":false,"terminal":false}]}`},
		{TurnStart{Turn: 1, Kind: "confirmation"}, `{"type":"turn.start","turn":1,"text":"","kind":"confirmation"}`},
		{TurnStart{Turn: 1}, `{"type":"turn.start","turn":1,"text":""}`},
		{TextDelta{Turn: 1, Text: "he said \"<hi>\""}, `{"type":"text.delta","turn":1,"text":"he said \"\u003chi\u003e\""}`},
		{TextDone{Turn: 1, Text: "done"}, `{"type":"text.done","turn":1,"text":"done"}`},
		{TranscriptInput{Turn: 2, Text: "in"}, `{"type":"transcript.input","turn":2,"text":"in"}`},
		{TranscriptOutput{Turn: 2, Text: "out"}, `{"type":"transcript.output","turn":2,"text":"out"}`},
		{Interrupted{Turn: 4}, `{"type":"audio.interrupted","turn":4}`},
		{ToolCall{Turn: 1, ID: "c1", Name: "kb_search", Args: args},
			`{"type":"tool.call","turn":1,"id":"c1","name":"kb_search","args":{"n":2,"q":"a\u003cb \u0026 c"}}`},
		{ToolCallStarted{Turn: 1, ID: "c1", Name: "kb_search"}, `{"type":"tool.call","turn":1,"id":"c1","name":"kb_search"}`},
		{ToolArgs{Turn: 1, ID: "c1", Args: args}, `{"type":"tool.args","turn":1,"id":"c1","args":{"n":2,"q":"a\u003cb \u0026 c"}}`},
		{ToolResult{Turn: 1, ID: "c1", Name: "kb_search", Refused: true, Error: &ToolError{Type: "BUDGET_EXCEEDED", Message: "no"}, DurationMs: 5},
			`{"type":"tool.result","turn":1,"id":"c1","name":"kb_search","ok":false,"refused":true,"error":{"type":"BUDGET_EXCEEDED","message":"no"},"durationMs":5}`},
		{ToolResult{Turn: 1, ID: "c1", Name: "kb_search", OK: true, Result: map[string]any{"n": 1}},
			`{"type":"tool.result","turn":1,"id":"c1","name":"kb_search","ok":true,"refused":false,"durationMs":0,"result":{"n":1}}`},
		{confirm, `{"type":"confirm.request","turn":2,"token":"t","tool":"x","args":{"n":2,"q":"a\u003cb \u0026 c"},"expiresAt":"2026-01-01T00:00:00Z"}`},
		{ConfirmDone{Token: "t", Tool: "x", Outcome: "approved"}, `{"type":"confirm.done","token":"t","tool":"x","outcome":"approved"}`},
		{ModeChange{Mode: ModeVoice, Reason: "voice.start", Tools: []ToolInfo{{Name: "finish", Modes: []Mode{"text", "voice"}, Terminal: true}}},
			`{"type":"mode","mode":"voice","reason":"voice.start","tools":[{"name":"finish","modes":["text","voice"],"requiresConfirmation":false,"terminal":true}]}`},
		{TurnDone{Turn: 1, Reason: ReasonTerminalTool, IgnoredIntents: []IgnoredIntent{{Type: "SUPPRESS_AUDIO", Reason: "text"}}},
			`{"type":"turn.done","turn":1,"reason":"terminal_tool","ignoredIntents":[{"type":"SUPPRESS_AUDIO","reason":"text"}]}`},
		{TurnDone{Turn: 1, Reason: ReasonEndTurn}, `{"type":"turn.done","turn":1,"reason":"end_turn"}`},
		{Blocked{Until: "2026-01-01T00:00:00Z", Reason: "spam"}, `{"type":"blocked","until":"2026-01-01T00:00:00Z","reason":"spam"}`},
		{NewError(CodeRateLimited, "slow down", true, 3), `{"type":"error","code":"rate_limited","message":"slow down","retryable":true,"turn":3}`},
		{NewError(CodeBadJSON, "bad", false, 0), `{"type":"error","code":"bad_json","message":"bad","retryable":false}`},
		{Pong{}, `{"type":"pong"}`},
		{AuthOK{ExpiresAt: "2026-01-01T00:00:00Z"}, `{"type":"auth.ok","expiresAt":"2026-01-01T00:00:00Z"}`},
		{AuthOK{}, `{"type":"auth.ok"}`},
		{History{Entries: []HistoryItem{{Role: "model", Text: "x", Turn: 1, Truncated: true}}, More: true},
			`{"type":"history","entries":[{"role":"model","text":"x","turn":1,"truncated":true}],"more":true}`},
		{History{}, `{"type":"history","entries":null,"more":false}`},
		{Handoff{Turn: 1, Reason: "asked", Summary: "s", At: "2026-01-01T00:00:00Z"},
			`{"type":"handoff","turn":1,"reason":"asked","summary":"s","at":"2026-01-01T00:00:00Z"}`},
		{HandoffPending{Message: "kept"}, `{"type":"handoff.pending","message":"kept"}`},
		{HandoffEnded{}, `{"type":"handoff.ended"}`},
	} {
		b, err := Encode(c.ev)
		if err != nil {
			t.Fatalf("%T: %v", c.ev, err)
		}
		if string(b) != c.want {
			t.Errorf("%T encodes as\n%s\nwant\n%s", c.ev, b, c.want)
		}
	}
}
