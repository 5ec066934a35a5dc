package fakeopenai_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	fo "github.com/turnstile-gw/turnstile/fake/fakeopenai"
	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/openaitext"
)

// client is the official client aimed at base, on its own transport.
func client(t *testing.T, base string) openai.Client {
	t.Helper()
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("OPENAI_API_KEY", "")
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return openaitext.NewClient(openaitext.ClientConfig{BaseURL: base, APIKey: "sk-any", HTTPClient: &http.Client{Transport: tr}})
}

func TestUnaryAnswerIsOneCompletionTheOfficialClientReads(t *testing.T) {
	reply := fo.CallReply(fo.Call{ID: "call_1", Name: "kb_search", Args: `{"query":"refunds"}`},
		fo.Call{ID: "call_2", Name: "kb_get", Args: `{"id":"x"}`})
	_, base := startServer(t, fo.NewScript(fo.Fixed(fo.TextReply("Five days.", 3)), fo.Fixed(reply)), fo.Options{})
	c := client(t, base)
	params := openai.ChatCompletionNewParams{Model: "gpt-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}

	res, err := c.Chat.Completions.New(testContext(t), params)
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	if res.Object != "chat.completion" || len(res.Choices) != 1 || res.Choices[0].Message.Content != "Five days." ||
		res.Choices[0].FinishReason != "stop" || res.Usage.TotalTokens == 0 {
		t.Errorf("completion = %s", res.RawJSON())
	}

	res, err = c.Chat.Completions.New(testContext(t), params)
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	calls := res.Choices[0].Message.ToolCalls
	if len(calls) != 2 || calls[0].ID != "call_1" || calls[0].Function.Name != "kb_search" || calls[0].Function.Arguments != `{"query":"refunds"}` ||
		calls[1].ID != "call_2" || res.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("completion = %s, want both calls assembled", res.RawJSON())
	}
}

func TestCloseEndsHangingStreamsAndLaterRequestsAreRefused(t *testing.T) {
	s := fo.New(fo.NewScript(fo.Fixed(fo.Reply{Chunks: []fo.Chunk{{Text: "wait"}}, Hang: true})), fo.Options{})
	base, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, base)
	stream := c.Chat.Completions.NewStreaming(testContext(t), openai.ChatCompletionNewParams{
		Model: "gpt-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	defer func() { _ = stream.Close() }()
	if !stream.Next() || stream.Current().Choices[0].Delta.Content != "wait" {
		t.Fatalf("first chunk: %v", stream.Err())
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	for stream.Next() {
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return while a stream was hanging")
	}
	if s.InFlight() != 0 {
		t.Errorf("%d requests still in flight after Close", s.InFlight())
	}
	if err := s.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

// demoModel is the adapter over the demo brain.
func demoModel(t *testing.T) transport.TextModel {
	t.Helper()
	_, base := startServer(t, fo.NewDemo(), fo.Options{})
	m, err := openaitext.New(client(t, base), "demo", openaitext.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// demoTurn streams one answer and returns its text and calls.
func demoTurn(t *testing.T, m transport.TextModel, req transport.TextRequest) (string, []transport.FunctionCall) {
	t.Helper()
	var text strings.Builder
	var calls []transport.FunctionCall
	for c, err := range m.Stream(testContext(t), req) {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		text.WriteString(c.Text)
		calls = append(calls, c.Calls...)
	}
	return text.String(), calls
}

var demoTools = []transport.ToolDecl{
	{Name: "kb_search", Parameters: map[string]any{"type": "object"}},
	{Name: "kb_get", Parameters: map[string]any{"type": "object"}},
	{Name: "finish", Parameters: map[string]any{"type": "object"}},
}

func TestDemoLooksUpTheKnowledgeBaseOverTheOpenAIWire(t *testing.T) {
	m := demoModel(t)
	const q = "How long do refunds take?"
	h := []transport.Entry{{Role: transport.RoleUser, Text: q}}
	_, calls := demoTurn(t, m, transport.TextRequest{History: h, Tools: demoTools})
	if len(calls) != 1 || calls[0].Name != "kb_search" || calls[0].Args["query"] != q || !strings.HasPrefix(calls[0].ID, "call_") {
		t.Fatalf("calls = %+v, want kb_search of the question with an OpenAI-style id", calls)
	}
	h = append(h, transport.Entry{Role: transport.RoleModel, Calls: calls}, transport.Entry{Role: transport.RoleTool,
		Results: []transport.FunctionResult{{ID: calls[0].ID, Name: "kb_search", Response: map[string]any{
			"output": map[string]any{"results": []any{map[string]any{"id": "refund-policy"}}}}}}})
	_, calls = demoTurn(t, m, transport.TextRequest{History: h, Tools: demoTools})
	if len(calls) != 1 || calls[0].Name != "kb_get" || calls[0].Args["id"] != "refund-policy" {
		t.Fatalf("calls = %+v, want kb_get of the hit", calls)
	}
	h = append(h, transport.Entry{Role: transport.RoleModel, Calls: calls}, transport.Entry{Role: transport.RoleTool,
		Results: []transport.FunctionResult{{ID: calls[0].ID, Name: "kb_get", Response: map[string]any{
			"output": map[string]any{"title": "Refund policy", "body": "Refunds take five business days."}}}}})
	text, calls := demoTurn(t, m, transport.TextRequest{History: h, Tools: demoTools})
	if len(calls) != 0 || text != "From “Refund policy”: Refunds take five business days." {
		t.Fatalf("answer %q with calls %+v", text, calls)
	}
}

func TestDemoSlashCallSendsBrokenArgumentsAsTyped(t *testing.T) {
	m := demoModel(t)
	h := []transport.Entry{{Role: transport.RoleUser, Text: `/call kb_search {"query": "caf\u00e9`}}
	_, calls := demoTurn(t, m, transport.TextRequest{History: h, Tools: demoTools})
	if len(calls) != 1 || calls[0].Name != "kb_search" || calls[0].ArgsError == "" {
		t.Fatalf("calls = %+v, want kb_search marked as having unreadable arguments", calls)
	}
	h = append(h, transport.Entry{Role: transport.RoleModel, Calls: calls}, transport.Entry{Role: transport.RoleTool,
		Results: []transport.FunctionResult{{ID: calls[0].ID, Name: "kb_search", Response: map[string]any{
			"ok": false, "error": map[string]any{"type": "VALIDATION", "code": "invalid_json", "message": "Invalid tool arguments JSON"}}}}})
	text, _ := demoTurn(t, m, transport.TextRequest{History: h, Tools: demoTools})
	if text != "The kb_search tool failed: Invalid tool arguments JSON" {
		t.Errorf("answer = %q, want the failure reported", text)
	}
}

func TestDemoDoesNotCallToolsWhenToolChoiceIsNone(t *testing.T) {
	_, base := startServer(t, fo.NewDemo(), fo.Options{})
	m, err := openaitext.New(client(t, base), "demo", openaitext.Options{ToolChoice: openaitext.ToolChoiceNone})
	if err != nil {
		t.Fatal(err)
	}
	text, calls := demoTurn(t, m, transport.TextRequest{History: []transport.Entry{{Role: transport.RoleUser, Text: "refunds?"}}, Tools: demoTools})
	if len(calls) != 0 || !strings.Contains(text, "tool_choice none") {
		t.Errorf("answer %q with calls %+v, want text explaining tools are off", text, calls)
	}
}

func TestDemoStreamsItsTextInSeveralChunks(t *testing.T) {
	_, base := startServer(t, &fo.DemoBrain{Pace: time.Millisecond}, fo.Options{})
	m, err := openaitext.New(client(t, base), "demo", openaitext.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for c, err := range m.Stream(testContext(t), transport.TextRequest{History: []transport.Entry{{Role: transport.RoleUser, Text: "hello"}}}) {
		if err != nil {
			t.Fatal(err)
		}
		if c.Text != "" {
			n++
		}
	}
	if n < 2 {
		t.Errorf("the greeting came in %d text chunks, want it streamed in several", n)
	}
}
