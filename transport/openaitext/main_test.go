package openaitext_test

import (
	"net/http"
	"testing"

	"go.uber.org/goleak"

	"github.com/turnstile-gw/turnstile/fake/fakeopenai"
	"github.com/turnstile-gw/turnstile/internal/texttest"
	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/openaitext"
)

// Streams run over real HTTP connections; none may outlive a test. The
// ignored workers are process-lifetime goroutines started by linked
// dependencies' init functions (bleve and genai's opencensus, through the
// tool registry the declaration test loads).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

const testModel = "gpt-test-mini"

// startFake runs a fake OpenAI server for brain on loopback until the test
// ends and returns it with its base URL.
func startFake(t *testing.T, brain fakeopenai.Brain, opts fakeopenai.Options) (*fakeopenai.Server, string) {
	t.Helper()
	s := fakeopenai.New(brain, opts)
	base, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("start fake openai: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close fake openai: %v", err)
		}
	})
	return s, base
}

// newModel returns the adapter over a real openai-go client aimed at base,
// on its own transport so that the test can drop its idle connections.
func newModel(t *testing.T, base, key string, opts openaitext.Options) *openaitext.Model {
	t.Helper()
	for _, v := range []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID",
		"OPENAI_ADMIN_KEY", "OPENAI_CUSTOM_HEADERS"} {
		t.Setenv(v, "")
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := openaitext.NewClient(openaitext.ClientConfig{BaseURL: base, APIKey: key, HTTPClient: &http.Client{Transport: tr}})
	m, err := openaitext.New(c, testModel, opts)
	if err != nil {
		t.Fatalf("new model: %v", err)
	}
	return m
}

// scripted starts a fake answering replies in order and returns the model
// aimed at it and the brain that records the requests.
func scripted(t *testing.T, replies ...fakeopenai.Reply) (*openaitext.Model, *fakeopenai.ScriptBrain) {
	t.Helper()
	brain := fakeopenai.NewScript()
	for _, r := range replies {
		brain.Push(fakeopenai.Fixed(r))
	}
	_, base := startFake(t, brain, fakeopenai.Options{})
	return newModel(t, base, "", openaitext.Options{}), brain
}

// answer drains a stream that must succeed and returns its chunks and the
// last one.
func answer(t *testing.T, m transport.TextModel, req transport.TextRequest) ([]transport.Chunk, transport.Chunk) {
	t.Helper()
	chunks, err := texttest.Collect(t, testContext(t), m, req)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(chunks) == 0 {
		t.Fatal("stream ended without a chunk")
	}
	return chunks, chunks[len(chunks)-1]
}

var (
	testContext = texttest.Context
	hello       = texttest.Hello
)
