package fakegemini

import (
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/genai"
)

// demoTurn sends contents to the demo model through the real client, with
// no tools declared, and returns the joined text and the calls of its
// answer.
func demoTurn(t *testing.T, c *genai.Client, contents []*genai.Content) (string, []*genai.FunctionCall, *genai.Content) {
	t.Helper()
	return demoTurnWith(t, c, contents, nil)
}

// demoTurnWith is demoTurn with a request config (declared tools).
func demoTurnWith(t *testing.T, c *genai.Client, contents []*genai.Content, cfg *genai.GenerateContentConfig) (string, []*genai.FunctionCall, *genai.Content) {
	t.Helper()
	resps, err := collect(c.Models.GenerateContentStream(testContext(t), "demo", contents, cfg))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(resps) == 0 || finishReason(resps[len(resps)-1]) != genai.FinishReasonStop {
		t.Fatalf("answer of %d chunks does not end with STOP", len(resps))
	}
	var text strings.Builder
	var calls []*genai.FunctionCall
	model := &genai.Content{Role: genai.RoleModel}
	for _, r := range resps {
		text.WriteString(r.Text())
		calls = append(calls, r.FunctionCalls()...)
		model.Parts = append(model.Parts, r.Candidates[0].Content.Parts...)
	}
	return text.String(), calls, model
}

func toolResult(name string, response map[string]any) *genai.Content {
	return genai.NewContentFromFunctionResponse(name, response, genai.RoleUser)
}

func TestDemoGreetsAndExplains(t *testing.T) {
	_, base := startServer(t, NewDemo())
	c := newClient(t, base)
	for _, greeting := range []string{"hi", "Hello!", "hey there", "Good morning"} {
		text, calls, _ := demoTurn(t, c, genai.Text(greeting))
		if len(calls) != 0 || !strings.Contains(text, "offline demo model") || !strings.Contains(text, "knowledge base") {
			t.Errorf("%q: answer %q with %d calls, want a friendly demo-model text", greeting, text, len(calls))
		}
	}
	for _, ask := range []string{"help", "What can you do?"} {
		text, calls, _ := demoTurn(t, c, genai.Text(ask))
		if len(calls) != 0 || !strings.Contains(text, "kb_search") {
			t.Errorf("%q: answer %q with %d calls, want an explanation", ask, text, len(calls))
		}
	}
}

func TestDemoAnswersQuestionFromKnowledgeBase(t *testing.T) {
	_, base := startServer(t, NewDemo())
	c := newClient(t, base)
	const question = "Hi, how long do refunds take?"

	contents := genai.Text(question)
	_, calls, model := demoTurn(t, c, contents)
	if len(calls) != 1 || calls[0].Name != "kb_search" || calls[0].Args["query"] != question || calls[0].Args["limit"] != float64(3) {
		t.Fatalf("calls = %+v, want kb_search{query: the question, limit: 3}", calls)
	}

	contents = append(contents, model, toolResult("kb_search", map[string]any{"output": map[string]any{"results": []any{
		map[string]any{"id": "refund-policy", "title": "Refund policy", "snippet": "Refunds take…", "score": 2.1},
		map[string]any{"id": "shipping", "title": "Shipping", "snippet": "…", "score": 0.4},
	}}}))
	_, calls, model = demoTurn(t, c, contents)
	if len(calls) != 1 || calls[0].Name != "kb_get" || calls[0].Args["id"] != "refund-policy" {
		t.Fatalf("calls = %+v, want kb_get{id: refund-policy}", calls)
	}

	body := "# Refund policy\n\nRefunds are paid **within five business days** after we receive the item. " +
		"See [the returns page](https://example.com/returns).\n\n" +
		"```\nnot quoted\n```\n\n" + "Store credit is issued instantly.\n\n## Exceptions\n\nGift cards are final."
	contents = append(contents, model, toolResult("kb_get", map[string]any{"output": map[string]any{
		"id": "refund-policy", "title": "Refund policy", "body": body,
	}}))
	text, calls, _ := demoTurn(t, c, contents)
	want := "From “Refund policy”: Refunds are paid within five business days after we receive the item. " +
		"See the returns page. Store credit is issued instantly."
	if len(calls) != 0 || text != want {
		t.Fatalf("answer = %q with %d calls, want %q", text, len(calls), want)
	}
}

func TestDemoSaysWhenNothingFound(t *testing.T) {
	_, base := startServer(t, NewDemo())
	c := newClient(t, base)
	contents := genai.Text("What is the airspeed of a swallow?")
	_, _, model := demoTurn(t, c, contents)
	contents = append(contents, model, toolResult("kb_search", map[string]any{"output": map[string]any{"results": []any{}}}))

	text, calls, _ := demoTurn(t, c, contents)
	if len(calls) != 0 || !strings.HasPrefix(text, "I couldn't find anything about that in the knowledge base") {
		t.Fatalf("answer = %q with %d calls, want the nothing-found text", text, len(calls))
	}
}

func TestDemoReportsToolFailure(t *testing.T) {
	_, base := startServer(t, NewDemo())
	c := newClient(t, base)
	contents := genai.Text("refunds?")
	_, _, model := demoTurn(t, c, contents)
	contents = append(contents, model, toolResult("kb_search", map[string]any{"error": map[string]any{
		"type": "TRANSIENT", "message": "index is rebuilding", "retryable": true,
	}}))

	text, calls, _ := demoTurn(t, c, contents)
	if len(calls) != 0 || !strings.Contains(text, "kb_search tool failed") || !strings.Contains(text, "index is rebuilding") {
		t.Fatalf("answer = %q with %d calls, want a failure text with the tool's message", text, len(calls))
	}
}

func TestDemoQuotesAtMostAboutSixHundredCharacters(t *testing.T) {
	const excerptLimit = 600
	long := strings.Repeat("word ", 400)
	r := NewDemo().Respond(t.Context(), &Request{Contents: []*genai.Content{
		toolResult("kb_get", map[string]any{"output": map[string]any{"id": "x", "title": "Long", "body": "# Long\n\n" + long}}),
	}})
	text := merge(r.Chunks).Text
	if len(r.Chunks) < 2 || r.Chunks[len(r.Chunks)-1].FinishReason != "STOP" {
		t.Errorf("answer in %d chunks, want several ending in STOP", len(r.Chunks))
	}
	quote := strings.TrimPrefix(text, "From “Long”: ")
	if n := utf8.RuneCountInString(quote); n > excerptLimit || !strings.HasSuffix(quote, "word…") {
		t.Fatalf("quote of %d runes ending %q, want at most %d ending at a word with an ellipsis", n, quote[max(0, len(quote)-10):], excerptLimit)
	}
}
