package geminitext_test

import (
	"context"
	"net/http"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/internal/texttest"
	"github.com/turnstile-gw/turnstile/transport/geminitext"
)

// Streams run over real HTTP connections; none may outlive a test. The
// ignored workers are process-lifetime goroutines started by linked
// dependencies' init functions (opencensus under genai).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

const testModel = "gemini-2.5-flash"

// startFake runs a fake Gemini server for brain on loopback until the test
// ends and returns it with its base URL.
func startFake(t *testing.T, brain fakegemini.Brain) (*fakegemini.Server, string) {
	t.Helper()
	s := fakegemini.New(brain, nil)
	base, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("start fake gemini: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close fake gemini: %v", err)
		}
	})
	return s, base
}

// newModel returns the adapter over a real genai client aimed at base, on
// its own transport so that the test can drop its idle connections.
func newModel(t *testing.T, base string) *geminitext.Model {
	t.Helper()
	return newModelWith(t, base, geminitext.Options{})
}

// newModelWith is newModel with options.
func newModelWith(t *testing.T, base string, opts geminitext.Options) *geminitext.Model {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return newModelClient(t, base, &http.Client{Transport: tr}, opts)
}

// newModelClient is newModelWith over the HTTP client hc.
func newModelClient(t *testing.T, base string, hc *http.Client, opts ...geminitext.Options) *geminitext.Model {
	t.Helper()
	for _, v := range []string{"GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GEMINI_BASE_URL",
		"GOOGLE_GENAI_USE_ENTERPRISE", "GOOGLE_VERTEX_BASE_URL", "GOOGLE_API_KEY", "GEMINI_API_KEY"} {
		t.Setenv(v, "")
	}
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		Backend:     genai.BackendGeminiAPI,
		APIKey:      "test-key",
		HTTPClient:  hc,
		HTTPOptions: genai.HTTPOptions{BaseURL: base},
	})
	if err != nil {
		t.Fatalf("new genai client: %v", err)
	}
	var o geminitext.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	m, err := geminitext.New(c, testModel, o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var (
	testContext = texttest.Context
	hello       = texttest.Hello
)
