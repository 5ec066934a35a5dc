package fakegemini

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/genai"
)

func TestMain(m *testing.M) {
	// The genai client links go.opencensus.io, whose package init starts a
	// worker goroutine that lives for the whole process.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

const testModel = "gemini-2.5-flash"

// startServer runs a fake server for brain on a loopback port until the test
// ends and returns it with its base URL.
func startServer(t *testing.T, brain Brain) (*Server, string) {
	t.Helper()
	s := New(brain, nil)
	base, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s, base
}

// newClient returns a real genai client aimed at base, immune to the
// environment variables that would redirect it, on its own transport so the
// test can drop its idle connections.
func newClient(t *testing.T, base string) *genai.Client {
	t.Helper()
	for _, v := range []string{"GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE",
		"GOOGLE_GEMINI_BASE_URL", "GOOGLE_VERTEX_BASE_URL", "GOOGLE_API_KEY", "GEMINI_API_KEY"} {
		t.Setenv(v, "")
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		Backend:     genai.BackendGeminiAPI,
		APIKey:      "k",
		HTTPClient:  &http.Client{Transport: tr},
		HTTPOptions: genai.HTTPOptions{BaseURL: base},
	})
	if err != nil {
		t.Fatalf("new genai client: %v", err)
	}
	return c
}

// collect drains a stream, stopping at the first error as the SDK requires.
func collect(seq iter.Seq2[*genai.GenerateContentResponse, error]) ([]*genai.GenerateContentResponse, error) {
	var out []*genai.GenerateContentResponse
	for r, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func asAPIError(t *testing.T, err error) genai.APIError {
	t.Helper()
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("error %v (%T) is not a genai.APIError", err, err)
	}
	return apiErr
}

func finishReason(r *genai.GenerateContentResponse) genai.FinishReason {
	if len(r.Candidates) == 0 {
		return ""
	}
	return r.Candidates[0].FinishReason
}
