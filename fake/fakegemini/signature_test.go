package fakegemini

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/genai"
)

// signedTurn runs the first round of a tool turn against a signing brain
// and returns the contents so far (user question, model calls).
func signedTurn(t *testing.T, c *genai.Client) []*genai.Content {
	t.Helper()
	contents := genai.Text("Open a ticket and look up refunds.")
	resps, err := collect(c.Models.GenerateContentStream(testContext(t), "gemini-3-flash", contents, nil))
	if err != nil {
		t.Fatalf("first round: %v", err)
	}
	return append(contents, resps[0].Candidates[0].Content)
}

func results(names ...string) *genai.Content {
	c := &genai.Content{Role: genai.RoleUser}
	for _, n := range names {
		c.Parts = append(c.Parts, &genai.Part{FunctionResponse: &genai.FunctionResponse{Name: n, Response: map[string]any{"output": "ok"}}})
	}
	return c
}

func TestSignedBrainSignsTheFirstCallOfEachReply(t *testing.T) {
	signed := RequireThoughtSignatures(NewScript(Fixed(CallReply(
		Call{Name: "create_ticket", Args: map[string]any{"title": "x"}}, Call{Name: "kb_search"}))))
	_, base := startServer(t, signed)
	contents := signedTurn(t, newClient(t, base))
	parts := contents[1].Parts
	if len(parts) != 2 || parts[0].FunctionCall == nil || parts[1].FunctionCall == nil {
		t.Fatalf("model content %+v, want two function calls", contents[1])
	}
	if len(parts[0].ThoughtSignature) == 0 || len(parts[1].ThoughtSignature) != 0 {
		t.Errorf("signatures %q / %q, want one on the first parallel call only, as Gemini 3 does",
			parts[0].ThoughtSignature, parts[1].ThoughtSignature)
	}
	if signed.Issued() != 1 {
		t.Errorf("issued %d signatures, want 1", signed.Issued())
	}
}

func TestSignedBrainRequiresTheSignatureBackUnchanged(t *testing.T) {
	cases := []struct {
		name    string
		tamper  func(model *genai.Content)
		message string // "" for success
	}{
		{"kept unchanged", func(*genai.Content) {}, ""},
		{"dropped", func(m *genai.Content) { m.Parts[0].ThoughtSignature = nil },
			"Function call is missing a thought_signature in functionCall parts. This is required for tools to work " +
				"correctly, and missing thought_signature may lead to degraded model performance. Additional data, " +
				"function call `default_api:create_ticket` , position 2. Please refer to " +
				"https://ai.google.dev/gemini-api/docs/thought-signatures for more details."},
		{"altered", func(m *genai.Content) {
			m.Parts[0].ThoughtSignature = append(bytes.Clone(m.Parts[0].ThoughtSignature[:8]), "forged"...)
		}, "Corrupted thought signature."},
		{"moved to another call", func(m *genai.Content) {
			m.Parts[0].ThoughtSignature, m.Parts[1].ThoughtSignature = nil, m.Parts[0].ThoughtSignature
		}, "Corrupted thought signature."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			script := NewScript(Fixed(CallReply(Call{Name: "create_ticket"}, Call{Name: "kb_search"})), Fixed(TextReply("Done.", 1)))
			_, base := startServer(t, RequireThoughtSignatures(script))
			c := newClient(t, base)
			contents := signedTurn(t, c)
			tc.tamper(contents[1])
			contents = append(contents, results("create_ticket", "kb_search"))

			resps, err := collect(c.Models.GenerateContentStream(testContext(t), "gemini-3-flash", contents, nil))
			if tc.message == "" {
				if err != nil || len(resps) != 1 || resps[0].Text() != "Done." {
					t.Fatalf("second round: %v, %v; want the answer", resps, err)
				}
				return
			}
			apiErr := asAPIError(t, err)
			if apiErr.Code != 400 || apiErr.Status != "INVALID_ARGUMENT" || apiErr.Message != tc.message {
				t.Fatalf("error = %+v, want 400 INVALID_ARGUMENT %q", apiErr, tc.message)
			}
			if script.Remaining() != 1 || len(script.Requests()) != 1 {
				t.Errorf("the refused request reached the script")
			}
		})
	}
}

func TestSignedBrainChecksOnlyTheCurrentTurn(t *testing.T) {
	script := NewScript(Fixed(CallReply(Call{Name: "kb_search"})), Fixed(TextReply("Found it.", 1)),
		Fixed(TextReply("You're welcome.", 1)))
	_, base := startServer(t, RequireThoughtSignatures(script))
	c := newClient(t, base)
	contents := signedTurn(t, c)
	contents = append(contents, results("kb_search"))
	resps, err := collect(c.Models.GenerateContentStream(testContext(t), "gemini-3-flash", contents, nil))
	if err != nil {
		t.Fatalf("second round: %v", err)
	}
	// A later turn whose history lost an older signature still works, as
	// with the real API, which validates the current turn only.
	contents[1].Parts[0].ThoughtSignature = nil
	contents = append(contents, resps[0].Candidates[0].Content, genai.NewContentFromText("thanks", genai.RoleUser))
	if _, err := collect(c.Models.GenerateContentStream(testContext(t), "gemini-3-flash", contents, nil)); err != nil {
		t.Fatalf("next turn: %v", err)
	}
}

func TestVertexMissingSignatureMessage(t *testing.T) {
	script := NewScript(Fixed(CallReply(Call{Name: "create_ticket"})))
	_, base := startServer(t, RequireThoughtSignatures(script))
	c := newVertexClient(t, base)
	contents := genai.Text("Open a ticket.")
	resps, err := collect(c.Models.GenerateContentStream(testContext(t), "gemini-3-flash", contents, nil))
	if err != nil {
		t.Fatalf("first round: %v", err)
	}
	model := resps[0].Candidates[0].Content
	model.Parts[0].ThoughtSignature = nil
	_, err = collect(c.Models.GenerateContentStream(testContext(t), "gemini-3-flash", append(contents, model, results("create_ticket")), nil))
	if apiErr := asAPIError(t, err); !strings.HasPrefix(apiErr.Message, "Unable to submit request because function call `create_ticket` in the 2. content block is missing a `thought_signature`.") {
		t.Errorf("message %q, want Vertex AI's wording", apiErr.Message)
	}
}

func TestSignedBrainSignsEachReplyAfreshWhenAStepIsReused(t *testing.T) {
	step := Fixed(CallReply(Call{Name: "kb_search"}))
	signed := RequireThoughtSignatures(NewScript(step, step))
	_, base := startServer(t, signed)
	c := newClient(t, base)
	var sigs [][]byte
	for range 2 {
		contents := signedTurn(t, c)
		sigs = append(sigs, contents[1].Parts[0].ThoughtSignature)
	}
	if len(sigs[0]) == 0 || bytes.Equal(sigs[0], sigs[1]) || signed.Issued() != 2 {
		t.Errorf("signatures %q and %q (%d issued), want two different ones", sigs[0], sigs[1], signed.Issued())
	}
}
