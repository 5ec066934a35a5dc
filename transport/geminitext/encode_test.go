package geminitext_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"sync"
	"testing"

	"google.golang.org/genai"

	fg "github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/internal/texttest"
	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/geminitext"
)

// bodies is an HTTP transport that keeps each request's body and passes
// the request on.
type bodies struct {
	next http.RoundTripper
	mu   sync.Mutex
	got  [][]byte
}

func (b *bodies) RoundTrip(r *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.got = append(b.got, body)
	b.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	return b.next.RoundTrip(r)
}

// The adapter encodes a request's contents itself rather than through the
// SDK's conversion; the body it sends must be the very one the SDK sends
// for the same contents: text, merged user entries, calls with arguments
// and thought signatures, tool results, reminders folded into the system
// instruction, tools and tool config.
func TestEncodedContentsAreTheBodyTheSDKWouldSend(t *testing.T) {
	for _, v := range []string{"GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GEMINI_BASE_URL",
		"GOOGLE_GENAI_USE_ENTERPRISE", "GOOGLE_VERTEX_BASE_URL", "GOOGLE_API_KEY", "GEMINI_API_KEY"} {
		t.Setenv(v, "")
	}
	reply := fg.TextReply("Five days.", 1)
	_, base := startFake(t, fg.NewScript(fg.Fixed(reply), fg.Fixed(reply)))
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	rec := &bodies{next: tr}
	client, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		Backend: genai.BackendGeminiAPI, APIKey: "test-key",
		HTTPClient: &http.Client{Transport: rec}, HTTPOptions: genai.HTTPOptions{BaseURL: base},
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := geminitext.New(client, testModel, geminitext.Options{})
	if err != nil {
		t.Fatal(err)
	}
	req := transport.TextRequest{
		System: "You answer from the knowledge base <kb> & nothing else.",
		History: []transport.Entry{
			{Role: transport.RoleUser, Text: "refunds?"},
			{Role: transport.RoleUser, Text: "and <returns> & exchanges, \"quickly\"\u2028"},
			{Role: transport.RoleModel, Text: "Let me look.", Calls: []transport.FunctionCall{
				{ID: "call-1", Name: "kb_search", Args: map[string]any{"query": "refunds", "limit": 3,
					"nested": map[string]any{"list": []any{1.5, "x", true, nil}}}, Signature: []byte{0, 1, 2, 250}},
				{ID: "c1-0-1", Name: "kb_get", Args: map[string]any{"id": "returns"}, Synthetic: true}}},
			{Role: transport.RoleTool, Results: []transport.FunctionResult{
				{ID: "call-1", Name: "kb_search", Response: map[string]any{"output": map[string]any{"results": []any{}}}},
				{ID: "c1-0-1", Name: "kb_get", Response: map[string]any{"error": "not found"}}}},
			{Role: transport.RoleModel, Text: "Five days."},
			{Role: transport.RoleSystem, Text: "Answer from the tools only."},
			{Role: transport.RoleUser, Text: "thanks"},
		},
		Tools: []transport.ToolDecl{{Name: "kb_search", Description: "Search.",
			Parameters: map[string]any{"type": "object", "properties": map[string]any{"query": map[string]any{"type": "string"}}}}},
	}
	if _, err := texttest.Collect(t, testContext(t), m, req); err != nil {
		t.Fatalf("stream: %v", err)
	}
	// The SDK's own conversion of the same request.
	system, history := geminitext.FoldReminders(req.System, req.History)
	cfg := &genai.GenerateContentConfig{SystemInstruction: geminitext.SystemInstruction(system), Tools: geminitext.Tools(req.Tools)}
	cfg.ToolConfig = geminitext.ToolConfig(transport.ToolChoiceAuto, cfg.Tools)
	for _, err := range client.Models.GenerateContentStream(testContext(t), testModel, geminitext.Contents(history), cfg) {
		if err != nil {
			t.Fatalf("the SDK's own request: %v", err)
		}
	}
	if len(rec.got) != 2 {
		t.Fatalf("%d requests, want 2", len(rec.got))
	}
	var ours, sdks map[string]any
	if err := json.Unmarshal(rec.got[0], &ours); err != nil {
		t.Fatalf("the adapter's body: %v", err)
	}
	if err := json.Unmarshal(rec.got[1], &sdks); err != nil {
		t.Fatalf("the SDK's body: %v", err)
	}
	if contents, _ := ours["contents"].([]any); len(contents) != 3 {
		t.Fatalf("the adapter sent %d contents, want 3 (users merged, the answer a reminder corrects gone):\n%s", len(contents), rec.got[0])
	}
	if !reflect.DeepEqual(ours, sdks) {
		t.Errorf("the adapter's body differs from the SDK's:\n%s\n%s", rec.got[0], rec.got[1])
	}
}
