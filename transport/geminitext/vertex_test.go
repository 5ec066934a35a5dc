package geminitext_test

import (
	"context"
	"testing"

	"cloud.google.com/go/auth"
	"google.golang.org/genai"

	fg "github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/internal/texttest"
	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/geminitext"
)

type staticToken string

func (s staticToken) Token(context.Context) (*auth.Token, error) {
	return &auth.Token{Value: string(s), Type: "Bearer"}, nil
}

// TestStreamOverVertexAI runs a signed two-round tool turn through the
// adapter on a Vertex AI client: project, location and an access token
// instead of an API key.
func TestStreamOverVertexAI(t *testing.T) {
	script := fg.NewScript(fg.Fixed(fg.CallReply(fg.Call{Name: "kb_search", Args: map[string]any{"query": "refunds"}})),
		fg.Fixed(fg.TextReply("Five days.", 1)))
	_, base := startFake(t, fg.RequireThoughtSignatures(script))
	for _, v := range []string{"GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE", "GOOGLE_VERTEX_BASE_URL",
		"GOOGLE_GEMINI_BASE_URL", "GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION"} {
		t.Setenv(v, "")
	}
	client, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		Backend: genai.BackendVertexAI, Project: "p", Location: "us-central1",
		Credentials: auth.NewCredentials(&auth.CredentialsOptions{TokenProvider: staticToken("tok")}),
		HTTPOptions: genai.HTTPOptions{BaseURL: base},
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := geminitext.New(client, testModel, geminitext.Options{})
	if err != nil {
		t.Fatal(err)
	}
	history := []transport.Entry{{Role: transport.RoleUser, Text: "refunds?"}}
	chunks, err := texttest.Collect(t, testContext(t), m, transport.TextRequest{History: history})
	if err != nil || len(chunks) != 1 || len(chunks[0].Calls) != 1 {
		t.Fatalf("first round: %+v, %v", chunks, err)
	}
	history = append(history, transport.Entry{Role: transport.RoleModel, Calls: chunks[0].Calls},
		transport.Entry{Role: transport.RoleTool, Results: []transport.FunctionResult{{Name: "kb_search", Response: map[string]any{"output": "5 days"}}}})
	chunks, err = texttest.Collect(t, testContext(t), m, transport.TextRequest{History: history})
	if err != nil || len(chunks) != 1 || chunks[0].Text != "Five days." {
		t.Fatalf("second round: %+v, %v", chunks, err)
	}
	for _, r := range script.Requests() {
		if r.API != fg.VertexAI || r.Project != "p" || r.Location != "us-central1" || r.Header.Get("Authorization") != "Bearer tok" {
			t.Errorf("request api %q project %q location %q auth %q", r.API, r.Project, r.Location, r.Header.Get("Authorization"))
		}
	}
}
