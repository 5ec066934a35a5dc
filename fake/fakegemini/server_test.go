package fakegemini

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/internal/testwait"
)

func TestStreamedTextArrivesInOrderWithStopOnLastChunk(t *testing.T) {
	brain := NewScript(Fixed(Reply{Chunks: []Chunk{
		{Text: "The capital "}, {Text: "of France "}, {Text: "is Paris.", FinishReason: "STOP"},
	}}))
	_, base := startServer(t, brain)
	c := newClient(t, base)

	resps, err := collect(c.Models.GenerateContentStream(testContext(t), testModel, genai.Text("capital of France?"), nil))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	var texts []string
	for _, r := range resps {
		texts = append(texts, r.Text())
	}
	if want := []string{"The capital ", "of France ", "is Paris."}; !slices.Equal(texts, want) {
		t.Fatalf("chunks = %q, want %q", texts, want)
	}
	for i, r := range resps {
		want := genai.FinishReason("")
		if i == len(resps)-1 {
			want = genai.FinishReasonStop
		}
		if got := finishReason(r); got != want {
			t.Errorf("chunk %d finishReason = %q, want %q", i, got, want)
		}
		if r.ModelVersion != testModel || r.ResponseID == "" || r.ResponseID != resps[0].ResponseID {
			t.Errorf("chunk %d modelVersion %q responseId %q, want %q and one id per stream", i, r.ModelVersion, r.ResponseID, testModel)
		}
		if r.UsageMetadata == nil || r.UsageMetadata.TotalTokenCount == 0 {
			t.Errorf("chunk %d has no usage metadata", i)
		}
	}

	reqs := brain.Requests()
	if len(reqs) != 1 || reqs[0].Model != testModel || !reqs[0].Stream {
		t.Fatalf("brain saw %+v, want one streaming request for %s", reqs, testModel)
	}
	if got := reqs[0].Header.Get("x-goog-api-key"); got != "k" {
		t.Errorf("brain saw api key %q, want the client's", got)
	}
}

func TestTextReplyStreamsPiecesThatJoinToTheText(t *testing.T) {
	const text = "Refunds are processed within five business days of receiving the item."
	_, base := startServer(t, NewScript(Fixed(TextReply(text, 4))))
	c := newClient(t, base)

	resps, err := collect(c.Models.GenerateContentStream(testContext(t), testModel, genai.Text("refunds?"), nil))
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	var b strings.Builder
	for _, r := range resps {
		b.WriteString(r.Text())
	}
	if len(resps) != 4 || b.String() != text || finishReason(resps[3]) != genai.FinishReasonStop {
		t.Fatalf("got %d chunks joining to %q (last finish %q), want 4 chunks joining to %q ending in STOP",
			len(resps), b.String(), finishReason(resps[len(resps)-1]), text)
	}
}

func TestFunctionCallRoundTrip(t *testing.T) {
	searchSchema := map[string]any{
		"type":       "object",
		"properties": map[string]any{"query": map[string]any{"type": "string"}},
		"required":   []any{"query"},
	}
	brain := NewScript(
		Fixed(CallReply(
			Call{Name: "kb_search", Args: map[string]any{"query": "refunds", "limit": 3}},
			Call{ID: "call-2", Name: "kb_get", Args: map[string]any{"id": "refunds"}},
		)),
		Fixed(TextReply("Refunds take five days.", 2)),
	)
	_, base := startServer(t, brain)
	c := newClient(t, base)
	ctx := testContext(t)
	cfg := &genai.GenerateContentConfig{
		SystemInstruction: genai.NewContentFromText("You answer from the knowledge base.", genai.RoleUser),
		Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{
			Name: "kb_search", Description: "Search the knowledge base.", ParametersJsonSchema: searchSchema,
		}}}},
		Temperature:     genai.Ptr[float32](0.2),
		MaxOutputTokens: 256,
		ThinkingConfig:  &genai.ThinkingConfig{ThinkingBudget: genai.Ptr[int32](0)},
	}
	contents := genai.Text("How do refunds work?")

	resps, err := collect(c.Models.GenerateContentStream(ctx, testModel, contents, cfg))
	if err != nil {
		t.Fatalf("first stream: %v", err)
	}
	if len(resps) != 1 || finishReason(resps[0]) != genai.FinishReasonStop {
		t.Fatalf("got %d chunks, want one call chunk with STOP", len(resps))
	}
	calls := resps[0].FunctionCalls()
	if len(calls) != 2 {
		t.Fatalf("got %d calls, want 2", len(calls))
	}
	if calls[0].Name != "kb_search" || calls[0].ID != "" || calls[0].Args["query"] != "refunds" || calls[0].Args["limit"] != float64(3) {
		t.Errorf("first call = %+v, want kb_search{query:refunds, limit:3} without id", calls[0])
	}
	if calls[1].Name != "kb_get" || calls[1].ID != "call-2" || calls[1].Args["id"] != "refunds" {
		t.Errorf("second call = %+v, want kb_get{id:refunds} with id call-2", calls[1])
	}

	result := map[string]any{"output": map[string]any{"results": []any{map[string]any{"id": "refunds", "score": 1.5}}}}
	contents = append(contents, resps[0].Candidates[0].Content,
		genai.NewContentFromFunctionResponse("kb_search", result, genai.RoleUser))
	resps, err = collect(c.Models.GenerateContentStream(ctx, testModel, contents, cfg))
	if err != nil {
		t.Fatalf("second stream: %v", err)
	}
	if got := resps[0].Text() + resps[1].Text(); got != "Refunds take five days." {
		t.Errorf("answer = %q", got)
	}

	reqs := brain.Requests()
	if len(reqs) != 2 {
		t.Fatalf("brain saw %d requests, want 2", len(reqs))
	}
	first, second := reqs[0], reqs[1]
	if si := first.SystemInstruction; si == nil || len(si.Parts) != 1 || si.Parts[0].Text != "You answer from the knowledge base." {
		t.Errorf("system instruction = %+v", si)
	}
	if len(first.Tools) != 1 || len(first.Tools[0].FunctionDeclarations) != 1 {
		t.Fatalf("tools = %+v, want one declaration", first.Tools)
	}
	decl := first.Tools[0].FunctionDeclarations[0]
	schema, _ := decl.ParametersJsonSchema.(map[string]any)
	if decl.Name != "kb_search" || schema["type"] != "object" || decl.Parameters != nil {
		t.Errorf("declaration = %+v, want kb_search with parametersJsonSchema of type object", decl)
	}
	if gc := first.GenerationConfig; gc == nil || gc.Temperature == nil || *gc.Temperature != 0.2 || gc.MaxOutputTokens != 256 {
		t.Errorf("generation config = %+v, want temperature 0.2 and 256 tokens", gc)
	}
	if n := len(second.Contents); n != 3 {
		t.Fatalf("second request has %d contents, want user, model call, function response", n)
	}
	if mc := second.Contents[1]; mc.Role != genai.RoleModel || mc.Parts[0].FunctionCall == nil || mc.Parts[0].FunctionCall.Name != "kb_search" {
		t.Errorf("model turn = %+v, want the kb_search call echoed back", mc)
	}
	fr := second.Contents[2].Parts[0].FunctionResponse
	if fr == nil || fr.Name != "kb_search" {
		t.Fatalf("last content = %+v, want the kb_search function response", second.Contents[2])
	}
	out, _ := fr.Response["output"].(map[string]any)
	results, _ := out["results"].([]any)
	if len(results) != 1 || results[0].(map[string]any)["id"] != "refunds" {
		t.Errorf("function response = %+v, want the results the client sent", fr.Response)
	}
}

func TestPreStreamErrorSurfacesAsAPIError(t *testing.T) {
	_, base := startServer(t, NewScript(Fixed(ErrorReply(429, "RESOURCE_EXHAUSTED", "quota exceeded"))))
	c := newClient(t, base)

	resps, err := collect(c.Models.GenerateContentStream(testContext(t), testModel, genai.Text("hi"), nil))
	if len(resps) != 0 {
		t.Errorf("got %d chunks before the error, want none", len(resps))
	}
	apiErr := asAPIError(t, err)
	if apiErr.Code != 429 || apiErr.Status != "RESOURCE_EXHAUSTED" || apiErr.Message != "quota exceeded" {
		t.Fatalf("error = %+v, want 429 RESOURCE_EXHAUSTED quota exceeded", apiErr)
	}
}

func TestStatusWithoutErrorBodyGetsCanonicalStatus(t *testing.T) {
	_, base := startServer(t, NewScript(Fixed(Reply{Status: 503})))
	c := newClient(t, base)

	_, err := collect(c.Models.GenerateContentStream(testContext(t), testModel, genai.Text("hi"), nil))
	if apiErr := asAPIError(t, err); apiErr.Code != 503 || apiErr.Status != "UNAVAILABLE" {
		t.Fatalf("error = %+v, want 503 UNAVAILABLE", apiErr)
	}
}

func TestMidStreamErrorArrivesAfterEarlierChunks(t *testing.T) {
	_, base := startServer(t, NewScript(Fixed(Reply{
		Chunks:         []Chunk{{Text: "Let me "}, {Text: "think"}},
		MidStreamError: &APIError{Code: 500, Message: "internal error", Status: "INTERNAL"},
	})))
	c := newClient(t, base)

	resps, err := collect(c.Models.GenerateContentStream(testContext(t), testModel, genai.Text("hi"), nil))
	if len(resps) != 2 || resps[0].Text() != "Let me " || resps[1].Text() != "think" {
		t.Fatalf("got %d chunks before the error, want the two sent", len(resps))
	}
	if apiErr := asAPIError(t, err); apiErr.Code != 500 || apiErr.Status != "INTERNAL" || apiErr.Message != "internal error" {
		t.Fatalf("error = %+v, want 500 INTERNAL internal error", apiErr)
	}
}

func TestTruncatedStreamEndsWithoutErrorOrFinishReason(t *testing.T) {
	_, base := startServer(t, NewScript(Fixed(Reply{Chunks: []Chunk{{Text: "Half an "}, {Text: "answ"}}})))
	c := newClient(t, base)

	resps, err := collect(c.Models.GenerateContentStream(testContext(t), testModel, genai.Text("hi"), nil))
	if err != nil {
		t.Fatalf("stream: %v, want a clean end", err)
	}
	if len(resps) != 2 {
		t.Fatalf("got %d chunks, want 2", len(resps))
	}
	for i, r := range resps {
		if fr := finishReason(r); fr != "" {
			t.Errorf("chunk %d has finishReason %q, want none", i, fr)
		}
	}
}

func TestHangingStreamEndsWhenClientCancels(t *testing.T) {
	s, base := startServer(t, NewScript(Fixed(Reply{Chunks: []Chunk{{Text: "Still thinking"}}, Hang: true})))
	c := newClient(t, base)
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()

	var got []string
	var err error
	for r, e := range c.Models.GenerateContentStream(ctx, testModel, genai.Text("hi"), nil) {
		if e != nil {
			err = e
			break
		}
		got = append(got, r.Text())
		if s.InFlight() != 1 {
			t.Errorf("in flight = %d while the stream hangs, want 1", s.InFlight())
		}
		cancel()
	}
	if !slices.Equal(got, []string{"Still thinking"}) {
		t.Errorf("chunks = %q, want the one sent before hanging", got)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("stream error = %v, want context.Canceled", err)
	}
	testwait.For(t, "the server to release the hanging stream", func() bool { return s.InFlight() == 0 })
}

func TestCloseEndsHangingStream(t *testing.T) {
	s := New(NewScript(Fixed(Reply{Chunks: []Chunk{{Text: "Hold on"}}, Hang: true})), nil)
	base, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	c := newClient(t, base)

	next, stop := iter.Pull2(c.Models.GenerateContentStream(testContext(t), testModel, genai.Text("hi"), nil))
	defer stop()
	if r, err, ok := next(); !ok || err != nil || r.Text() != "Hold on" {
		t.Fatalf("first chunk = %v, %v, %v", r, err, ok)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Close did not end the hanging stream")
	}
	// The client sees the stream end (cleanly or with a read error), not a hang.
	for {
		_, err, ok := next()
		if !ok || err != nil {
			break
		}
	}
	if s.InFlight() != 0 {
		t.Fatalf("in flight = %d after Close, want 0", s.InFlight())
	}
}

func TestNonStreamingGenerateContentMergesChunks(t *testing.T) {
	brain := NewScript(Fixed(Reply{Chunks: []Chunk{
		{Text: "Looking "}, {Text: "it up."}, {Calls: []Call{{Name: "kb_search", Args: map[string]any{"query": "x"}}}, FinishReason: "STOP"},
	}}))
	_, base := startServer(t, brain)
	c := newClient(t, base)

	r, err := c.Models.GenerateContent(testContext(t), testModel, genai.Text("x?"), nil)
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	if r.Text() != "Looking it up." || len(r.FunctionCalls()) != 1 || finishReason(r) != genai.FinishReasonStop {
		t.Fatalf("response text %q, %d calls, finish %q; want merged text, one call, STOP", r.Text(), len(r.FunctionCalls()), finishReason(r))
	}
	if reqs := brain.Requests(); len(reqs) != 1 || reqs[0].Stream {
		t.Errorf("brain saw %+v, want one non-streaming request", reqs)
	}
}

func TestExhaustedScriptAnswers500(t *testing.T) {
	brain := NewScript(Fixed(TextReply("only answer", 1)))
	_, base := startServer(t, brain)
	c := newClient(t, base)
	ctx := testContext(t)

	if _, err := collect(c.Models.GenerateContentStream(ctx, testModel, genai.Text("one"), nil)); err != nil {
		t.Fatalf("first call: %v", err)
	}
	_, err := collect(c.Models.GenerateContentStream(ctx, testModel, genai.Text("two"), nil))
	if apiErr := asAPIError(t, err); apiErr.Code != http.StatusInternalServerError || !strings.Contains(apiErr.Message, "script exhausted") {
		t.Fatalf("error = %+v, want 500 script exhausted", apiErr)
	}
	if n := len(brain.Requests()); n != 2 {
		t.Errorf("brain recorded %d requests, want 2 (the extra one too)", n)
	}
}

func TestStartTwiceAndCloseTwice(t *testing.T) {
	s := New(NewDemo(), nil)
	base, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	if !strings.HasPrefix(base, "http://127.0.0.1:") || !strings.HasSuffix(base, "/") {
		t.Errorf("base URL = %q, want http://127.0.0.1:PORT/", base)
	}
	if _, err := s.Start("127.0.0.1:0"); err == nil {
		t.Error("second Start succeeded, want an error")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func TestCloseEndsHangingStreamWhenMountedElsewhere(t *testing.T) {
	s := New(NewScript(Fixed(Reply{Hang: true})), nil)
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	c := newClient(t, ts.URL+"/")

	done := make(chan error, 1)
	go func() {
		_, err := collect(c.Models.GenerateContentStream(testContext(t), testModel, genai.Text("hi"), nil))
		done <- err
	}()
	testwait.For(t, "the stream to start", func() bool { return s.InFlight() == 1 })
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("stream after Close: %v, want a clean end", err)
	}
	if _, err := collect(c.Models.GenerateContentStream(testContext(t), testModel, genai.Text("hi"), nil)); asAPIError(t, err).Code != http.StatusServiceUnavailable {
		t.Fatalf("request after Close: %v, want 503", err)
	}
}
