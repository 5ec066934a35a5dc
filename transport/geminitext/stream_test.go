package geminitext_test

import (
	"errors"
	"net"
	"reflect"
	"slices"
	"testing"

	"google.golang.org/genai"

	fg "github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/internal/texttest"
	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/geminitext"
)

func TestStreamYieldsTextDeltasInOrderThenFinishReason(t *testing.T) {
	_, base := startFake(t, fg.NewScript(fg.Fixed(fg.Reply{Chunks: []fg.Chunk{
		{Text: "Refunds "}, {Text: "take five "}, {Text: "business days.", FinishReason: "STOP"},
	}})))
	chunks, err := texttest.Collect(t, testContext(t), newModel(t, base), hello)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	var texts, reasons []string
	for _, c := range chunks {
		texts = append(texts, c.Text)
		reasons = append(reasons, c.FinishReason)
	}
	if want := []string{"Refunds ", "take five ", "business days."}; !slices.Equal(texts, want) {
		t.Errorf("deltas = %q, want %q", texts, want)
	}
	if want := []string{"", "", "STOP"}; !slices.Equal(reasons, want) {
		t.Errorf("finish reasons = %q, want STOP on the last chunk only", reasons)
	}
}

func TestStreamSurfacesFunctionCallsWithArgs(t *testing.T) {
	_, base := startFake(t, fg.NewScript(fg.Fixed(fg.CallReply(
		fg.Call{Name: "kb_search", Args: map[string]any{"query": "refunds", "limit": 3}},
		fg.Call{ID: "call-2", Name: "kb_get", Args: map[string]any{"id": "returns-and-refunds"}},
	))))
	chunks, err := texttest.Collect(t, testContext(t), newModel(t, base), hello)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(chunks) != 1 || chunks[0].FinishReason != "STOP" || chunks[0].Text != "" {
		t.Fatalf("chunks = %+v, want one call chunk ending in STOP without text", chunks)
	}
	want := []transport.FunctionCall{
		{Name: "kb_search", Args: map[string]any{"query": "refunds", "limit": float64(3)}},
		{ID: "call-2", Name: "kb_get", Args: map[string]any{"id": "returns-and-refunds"}},
	}
	if !reflect.DeepEqual(chunks[0].Calls, want) {
		t.Errorf("calls = %+v, want %+v (IDs as the provider sent them)", chunks[0].Calls, want)
	}
}

func TestStreamHTTPErrorsBecomeModelErrors(t *testing.T) {
	cases := []struct {
		status    int
		code      string
		retryable bool
	}{
		{429, "RESOURCE_EXHAUSTED", true},
		{503, "UNAVAILABLE", true},
		{400, "INVALID_ARGUMENT", false},
		{403, "PERMISSION_DENIED", false},
	}
	for _, tc := range cases {
		t.Run(tc.code, func(t *testing.T) {
			_, base := startFake(t, fg.NewScript(fg.Fixed(fg.ErrorReply(tc.status, tc.code, "upstream said no"))))
			chunks, err := texttest.Collect(t, testContext(t), newModel(t, base), hello)
			if len(chunks) != 0 {
				t.Errorf("got %d chunks before the error, want none", len(chunks))
			}
			var me *transport.ModelError
			if !errors.As(err, &me) {
				t.Fatalf("error = %v (%T), want *transport.ModelError", err, err)
			}
			if me.Status != tc.status || me.Code != tc.code || me.Retryable != tc.retryable || me.Message != "upstream said no" {
				t.Errorf("error = %+v, want status %d code %s retryable %v and the provider's message",
					*me, tc.status, tc.code, tc.retryable)
			}
		})
	}
}

func TestStreamWithoutFinishReasonIsTruncated(t *testing.T) {
	_, base := startFake(t, fg.NewScript(fg.Fixed(fg.Reply{Chunks: []fg.Chunk{{Text: "Half an "}, {Text: "answ"}}})))
	chunks, err := texttest.Collect(t, testContext(t), newModel(t, base), hello)
	if len(chunks) != 2 {
		t.Errorf("got %d chunks, want the 2 sent", len(chunks))
	}
	if !errors.Is(err, transport.ErrTruncated) {
		t.Fatalf("error = %v, want ErrTruncated", err)
	}
}

func TestStreamMidStreamErrorIsModelError(t *testing.T) {
	_, base := startFake(t, fg.NewScript(fg.Fixed(fg.Reply{
		Chunks:         []fg.Chunk{{Text: "Let me "}, {Text: "think"}},
		MidStreamError: &fg.APIError{Code: 500, Message: "internal error", Status: "INTERNAL"},
	})))
	chunks, err := texttest.Collect(t, testContext(t), newModel(t, base), hello)
	if len(chunks) != 2 || chunks[0].Text != "Let me " || chunks[1].Text != "think" {
		t.Errorf("chunks = %+v, want the two sent before the error", chunks)
	}
	var me *transport.ModelError
	if !errors.As(err, &me) {
		t.Fatalf("error = %v (%T), want *transport.ModelError", err, err)
	}
	if me.Status != 500 || me.Code != "INTERNAL" || !me.Retryable {
		t.Errorf("error = %+v, want retryable 500 INTERNAL", *me)
	}
}

func TestStreamCancelDuringHangEndsPromptlyWithContextError(t *testing.T) {
	s, base := startFake(t, fg.NewScript(fg.Fixed(fg.Reply{Chunks: []fg.Chunk{{Text: "Still thinking"}}, Hang: true})))
	texttest.CancelDuringHangEndsPromptly(t, newModel(t, base), s.InFlight)
}

func TestStreamDeadlineDuringHangIsContextError(t *testing.T) {
	_, base := startFake(t, fg.NewScript(fg.Fixed(fg.Reply{Hang: true})))
	texttest.DeadlineDuringHangIsContextError(t, newModel(t, base))
}

func TestStreamConsumerStoppingEarlyReleasesTheRequest(t *testing.T) {
	s, base := startFake(t, fg.NewScript(fg.Fixed(fg.Reply{Chunks: []fg.Chunk{{Text: "first"}, {Text: "second"}}, Hang: true})))
	texttest.ConsumerStoppingEarlyReleasesTheRequest(t, newModel(t, base), s.InFlight)
}

func TestStreamRefusedByAdmitSendsNothing(t *testing.T) {
	brain := fg.NewScript(fg.Fixed(fg.TextReply("hello", 1)))
	_, base := startFake(t, brain)
	texttest.RefusedRequestIsNotSent(t, newModel(t, base), func() int { return len(brain.Requests()) })
}

// With the gateway's HTTP client the request's headers go out while the
// verdict is awaited; a refused request's body (the conversation) never
// does, so the model sees no request.
func TestStreamHeldForItsVerdictSendsNoContentsWhenRefused(t *testing.T) {
	brain := fg.NewScript(fg.Fixed(fg.TextReply("hello", 1)))
	_, base := startFake(t, brain)
	hc := geminitext.HTTPClient()
	t.Cleanup(hc.CloseIdleConnections)
	texttest.RefusedRequestIsNotSent(t, newModelClient(t, base, hc), func() int { return len(brain.Requests()) })
}

// With the gateway's HTTP client the request's headers go out while its
// verdict is awaited; its body once admitted.
func TestStreamSendsItsHeadersBeforeTheVerdict(t *testing.T) {
	hc := geminitext.HTTPClient()
	t.Cleanup(hc.CloseIdleConnections)
	texttest.HeadersGoBeforeTheVerdict(t, func(base string) transport.TextModel { return newModelClient(t, base, hc) })
}

func TestStreamUnreachableServerIsRetryableModelError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = texttest.Collect(t, testContext(t), newModel(t, "http://"+addr+"/"), hello)
	var me *transport.ModelError
	if !errors.As(err, &me) {
		t.Fatalf("error = %v (%T), want *transport.ModelError", err, err)
	}
	if me.Status != 0 || !me.Retryable {
		t.Errorf("error = %+v, want status 0 and retryable", *me)
	}
}

func TestStreamSendsSystemInstructionToolsAndHistory(t *testing.T) {
	brain := fg.NewScript(fg.Fixed(fg.TextReply("Five days.", 1)))
	_, base := startFake(t, brain)
	params := map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"type":                 "object",
		"properties":           map[string]any{"query": map[string]any{"type": "string", "minLength": float64(1)}},
		"required":             []any{"query"},
		"additionalProperties": false,
	}
	req := transport.TextRequest{
		System: "You answer from the knowledge base.",
		History: []transport.Entry{
			{Role: transport.RoleUser, Text: "refunds?"},
			{Role: transport.RoleModel, Calls: []transport.FunctionCall{
				{ID: "c1-0-0", Name: "kb_search", Args: map[string]any{"query": "refunds"}, Synthetic: true}}},
			{Role: transport.RoleTool, Results: []transport.FunctionResult{
				{ID: "c1-0-0", Name: "kb_search", Response: map[string]any{"output": map[string]any{"results": []any{}}}}}},
		},
		Tools: []transport.ToolDecl{{Name: "kb_search", Description: "Search the knowledge base.", Parameters: params}},
	}
	if _, err := texttest.Collect(t, testContext(t), newModel(t, base), req); err != nil {
		t.Fatalf("stream: %v", err)
	}

	reqs := brain.Requests()
	if len(reqs) != 1 {
		t.Fatalf("fake saw %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Model != testModel || !r.Stream {
		t.Errorf("request for model %q stream %v, want a streaming request for %s", r.Model, r.Stream, testModel)
	}
	if si := r.SystemInstruction; si == nil || len(si.Parts) != 1 || si.Parts[0].Text != req.System {
		t.Errorf("system instruction = %+v, want %q", si, req.System)
	}
	if len(r.Tools) != 1 || len(r.Tools[0].FunctionDeclarations) != 1 {
		t.Fatalf("tools = %+v, want one tool with one declaration", r.Tools)
	}
	d := r.Tools[0].FunctionDeclarations[0]
	if d.Name != "kb_search" || d.Description != "Search the knowledge base." || d.Parameters != nil {
		t.Errorf("declaration = %+v, want kb_search with its description and no legacy parameters", d)
	}
	if !reflect.DeepEqual(d.ParametersJsonSchema, params) {
		t.Errorf("parametersJsonSchema = %#v, want the tool's JSON Schema unchanged %#v", d.ParametersJsonSchema, params)
	}
	if len(r.Contents) != 3 {
		t.Fatalf("contents = %d, want user, model call, user function response", len(r.Contents))
	}
	call, resp := r.Contents[1].Parts[0].FunctionCall, r.Contents[2].Parts[0].FunctionResponse
	if r.Contents[1].Role != genai.RoleModel || call == nil || call.Name != "kb_search" || call.ID != "" {
		t.Errorf("model content = %+v, want the kb_search call without its synthetic id", r.Contents[1])
	}
	if r.Contents[2].Role != genai.RoleUser || resp == nil || resp.Name != "kb_search" || resp.ID != "" {
		t.Errorf("tool content = %+v, want a user functionResponse for kb_search without the synthetic id", r.Contents[2])
	}
}

func TestStreamWithoutSystemOrToolsSendsNeither(t *testing.T) {
	brain := fg.NewScript(fg.Fixed(fg.TextReply("Hi.", 1)))
	_, base := startFake(t, brain)
	if _, err := texttest.Collect(t, testContext(t), newModel(t, base), hello); err != nil {
		t.Fatalf("stream: %v", err)
	}
	r := brain.Requests()[0]
	if r.SystemInstruction != nil || len(r.Tools) != 0 {
		t.Errorf("request has system %+v and tools %+v, want neither", r.SystemInstruction, r.Tools)
	}
}
