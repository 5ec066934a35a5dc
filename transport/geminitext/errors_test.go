package geminitext_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	fg "github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/internal/texttest"
	"github.com/turnstile-gw/turnstile/transport"
)

func TestBlockedPromptIsAPromptBlockedModelError(t *testing.T) {
	_, base := startFake(t, fg.NewScript(fg.Fixed(fg.BlockedReply("PROHIBITED_CONTENT"))))
	chunks, err := texttest.Collect(t, testContext(t), newModel(t, base), hello)
	if len(chunks) != 0 {
		t.Errorf("got %d chunks, want none", len(chunks))
	}
	if !errors.Is(err, transport.ErrPromptBlocked) {
		t.Fatalf("error = %v, want one matching transport.ErrPromptBlocked", err)
	}
	var me *transport.ModelError
	if !errors.As(err, &me) {
		t.Fatalf("error %T is not a *transport.ModelError", err)
	}
	if me.Status != 400 || me.Code != transport.CodePromptBlocked || me.Reason != "PROHIBITED_CONTENT" || me.Retryable ||
		!strings.Contains(me.Message, "PROHIBITED_CONTENT") {
		t.Errorf("error = %+v, want a non-retryable 400 PROMPT_BLOCKED naming the reason", *me)
	}
}

func TestOtherModelErrorsAreNotPromptBlocked(t *testing.T) {
	_, base := startFake(t, fg.NewScript(fg.Fixed(fg.ErrorReply(400, "INVALID_ARGUMENT", "bad"))))
	_, err := texttest.Collect(t, testContext(t), newModel(t, base), hello)
	if err == nil || errors.Is(err, transport.ErrPromptBlocked) {
		t.Fatalf("error = %v, want a model error that is not a blocked prompt", err)
	}
}

func TestRateLimitCarriesTheRetryDelay(t *testing.T) {
	_, base := startFake(t, fg.NewScript(fg.Fixed(fg.RateLimitReply(testModel, 29443869346*time.Nanosecond))))
	_, err := texttest.Collect(t, testContext(t), newModel(t, base), hello)
	var me *transport.ModelError
	if !errors.As(err, &me) {
		t.Fatalf("error = %v (%T), want *transport.ModelError", err, err)
	}
	if me.Status != 429 || me.Code != "RESOURCE_EXHAUSTED" || !me.Retryable || me.RetryAfter != 29443869346*time.Nanosecond {
		t.Errorf("error = %+v, want a retryable 429 with RetryAfter 29.443869346s", *me)
	}
	if !strings.Contains(me.Error(), "retry after 29.443869346s") {
		t.Errorf("error text %q does not say when to retry", me.Error())
	}
}

func TestErrorInfoReasonIsKept(t *testing.T) {
	_, base := startFake(t, fg.NewScript(fg.Fixed(fg.InvalidAPIKeyReply())))
	_, err := texttest.Collect(t, testContext(t), newModel(t, base), hello)
	var me *transport.ModelError
	if !errors.As(err, &me) || me.Reason != "API_KEY_INVALID" || me.RetryAfter != 0 {
		t.Fatalf("error = %+v, want reason API_KEY_INVALID and no retry delay", me)
	}
}

// TestTwoRoundToolTurnKeepsThoughtSignatures runs a tool turn against a
// model that signs its calls and refuses a history without the signatures,
// storing the history as JSON between the rounds as the gateway does in
// Redis.
func TestTwoRoundToolTurnKeepsThoughtSignatures(t *testing.T) {
	script := fg.NewScript(
		fg.Fixed(fg.CallReply(fg.Call{Name: "kb_search", Args: map[string]any{"query": "refunds"}})),
		fg.Fixed(fg.CallReply(fg.Call{Name: "kb_get", Args: map[string]any{"id": "refunds"}},
			fg.Call{Name: "create_ticket", Args: map[string]any{"title": "refund"}})),
		fg.Fixed(fg.TextReply("Refunds take five days; I opened a ticket.", 2)),
	)
	signed := fg.RequireThoughtSignatures(script)
	_, base := startFake(t, signed)
	m := newModel(t, base)
	history := []transport.Entry{{Role: transport.RoleUser, Text: "How long do refunds take?"}}

	for round := 1; ; round++ {
		chunks, err := texttest.Collect(t, testContext(t), m, transport.TextRequest{History: history})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		var calls []transport.FunctionCall
		var text string
		for _, c := range chunks {
			calls = append(calls, c.Calls...)
			text += c.Text
		}
		if len(calls) == 0 {
			if text != "Refunds take five days; I opened a ticket." || round != 3 {
				t.Fatalf("round %d answered %q", round, text)
			}
			break
		}
		if len(calls[0].Signature) == 0 {
			t.Fatalf("round %d: first call %+v has no signature", round, calls[0])
		}
		for _, c := range calls[1:] {
			if c.Signature != nil {
				t.Errorf("round %d: parallel call %s has a signature", round, c.Name)
			}
		}
		results := make([]transport.FunctionResult, len(calls))
		for i, c := range calls {
			results[i] = transport.FunctionResult{Name: c.Name, Response: map[string]any{"output": "ok"}}
		}
		history = append(history,
			transport.Entry{Role: transport.RoleModel, Calls: calls},
			transport.Entry{Role: transport.RoleTool, Results: results})
		history = throughJSON(t, history)
	}
	if signed.Issued() != 2 {
		t.Errorf("issued %d signatures, want one per call round", signed.Issued())
	}
	if n := len(script.Requests()); n != 3 {
		t.Errorf("the model answered %d requests, want 3 (none refused)", n)
	}
}

func TestHistoryWithoutSignaturesIsRefusedByASigningModel(t *testing.T) {
	script := fg.NewScript(fg.Fixed(fg.CallReply(fg.Call{Name: "kb_search"})))
	_, base := startFake(t, fg.RequireThoughtSignatures(script))
	m := newModel(t, base)
	history := []transport.Entry{{Role: transport.RoleUser, Text: "refunds?"}}
	chunks, err := texttest.Collect(t, testContext(t), m, transport.TextRequest{History: history})
	if err != nil || len(chunks) != 1 || len(chunks[0].Calls) != 1 {
		t.Fatalf("first round: %+v, %v", chunks, err)
	}
	call := chunks[0].Calls[0]
	call.Signature = nil // what a gateway that rebuilds calls from name and args sends
	history = append(history, transport.Entry{Role: transport.RoleModel, Calls: []transport.FunctionCall{call}},
		transport.Entry{Role: transport.RoleTool, Results: []transport.FunctionResult{{Name: "kb_search", Response: map[string]any{}}}})
	_, err = texttest.Collect(t, testContext(t), m, transport.TextRequest{History: history})
	var me *transport.ModelError
	if !errors.As(err, &me) || me.Status != 400 || !strings.Contains(me.Message, "thought_signature") {
		t.Fatalf("error = %v, want the 400 about the missing thought_signature", err)
	}
}

func TestFunctionCallSignatureSurvivesJSON(t *testing.T) {
	in := transport.Entry{Role: transport.RoleModel, Calls: []transport.FunctionCall{
		{ID: "c1", Name: "kb_search", Signature: []byte{0, 1, 2, 0xff}}, {ID: "c2", Name: "kb_get"}}}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"signature":"AAEC/w=="`) || strings.Count(string(data), "signature") != 1 {
		t.Errorf("JSON %s, want the signature as base64 on the first call only", data)
	}
	var out transport.Entry
	if err := json.Unmarshal(data, &out); err != nil || !reflect.DeepEqual(in, out) {
		t.Errorf("round trip = %+v, %v; want %+v", out, err, in)
	}
}

// throughJSON stores and reloads history, as the gateway's Redis store
// does.
func throughJSON(t *testing.T, h []transport.Entry) []transport.Entry {
	t.Helper()
	data, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var out []transport.Entry
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
