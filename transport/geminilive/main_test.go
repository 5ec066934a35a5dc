package geminilive_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/geminilive"
)

// leakIgnores are process-lifetime goroutines started by linked
// dependencies' init functions (opencensus under genai, bleve's analysis
// worker), the same as transport/geminitext ignores.
var leakIgnores = []goleak.Option{
	goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"),
	goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
}

// Sessions own a receiver and a sender goroutine and Connect may leave a
// waiter behind; none may outlive a test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leakIgnores...)
}

const testModel = "gemini-live-test"

// newModel returns the adapter over a real genai client whose Live base URL
// is ws://addr/.
func newModel(t *testing.T, addr string, opts geminilive.Options) *geminilive.Model {
	t.Helper()
	for _, v := range []string{"GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GEMINI_BASE_URL",
		"GOOGLE_GENAI_USE_ENTERPRISE", "GOOGLE_VERTEX_BASE_URL", "GOOGLE_API_KEY", "GEMINI_API_KEY"} {
		t.Setenv(v, "")
	}
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		Backend:     genai.BackendGeminiAPI,
		APIKey:      "k",
		HTTPOptions: genai.HTTPOptions{BaseURL: "ws://" + addr + "/"},
	})
	if err != nil {
		t.Fatalf("new genai client: %v", err)
	}
	return geminilive.New(c, testModel, opts)
}

// connect opens a session that the test closes when it ends.
func connect(t *testing.T, m *geminilive.Model, cfg transport.LiveConfig) transport.LiveSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := m.Connect(ctx, cfg)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// nextEvent waits for the next event; it fails the test if Events closes or
// nothing arrives in time.
func nextEvent(t *testing.T, s transport.LiveSession) transport.LiveEvent {
	t.Helper()
	select {
	case ev, ok := <-s.Events():
		if !ok {
			t.Fatalf("events closed early (err %v)", s.Err())
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
	}
	return transport.LiveEvent{}
}

// waitClosed drains events until the channel closes and returns them.
func waitClosed(t *testing.T, s transport.LiveSession) []transport.LiveEvent {
	t.Helper()
	var evs []transport.LiveEvent
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-s.Events():
			if !ok {
				return evs
			}
			evs = append(evs, ev)
		case <-timeout:
			t.Fatalf("events still open after 5s (got %d)", len(evs))
		}
	}
}
