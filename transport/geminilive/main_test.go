package geminilive_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"cloud.google.com/go/auth"
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

// The adapter starts no goroutines, and the tests' receivers must end with
// their sessions: none may outlive a test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leakIgnores...)
}

const testModel = "gemini-live-test"

// newModel returns the adapter over a real genai client whose Live base URL
// is ws://addr/.
func newModel(t testing.TB, addr string, opts geminilive.Options) *geminilive.Model {
	t.Helper()
	return geminilive.New(newClient(t, addr), testModel, opts)
}

// clearSDKEnv empties the variables through which the SDK would pick
// another backend, key, project or endpoint than a test gives it.
func clearSDKEnv(t testing.TB) {
	for _, v := range []string{"GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_GENAI_USE_ENTERPRISE",
		"GOOGLE_VERTEX_BASE_URL", "GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION",
		"GOOGLE_CLOUD_REGION", "GOOGLE_APPLICATION_CREDENTIALS"} {
		t.Setenv(v, "")
	}
}

// newClient is a Gemini API client with key "k" whose Live base URL is
// ws://addr/.
func newClient(t testing.TB, addr string) *genai.Client {
	t.Helper()
	return newClientOver(t, "ws", addr)
}

// newClientOver is newClient with the scheme ws or wss.
func newClientOver(t testing.TB, scheme, addr string) *genai.Client {
	t.Helper()
	clearSDKEnv(t)
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		Backend:     genai.BackendGeminiAPI,
		APIKey:      "k",
		HTTPOptions: genai.HTTPOptions{BaseURL: scheme + "://" + addr + "/"},
	})
	if err != nil {
		t.Fatalf("new genai client: %v", err)
	}
	return c
}

// Vertex AI coordinates of the tests.
const (
	testProject  = "test-project"
	testLocation = "europe-west4"
)

// newVertexClient is a Vertex AI client (project, location, and tokens
// from src as its credentials) whose Live base URL is ws://addr/.
func newVertexClient(t testing.TB, addr string, src auth.TokenProvider) *genai.Client {
	t.Helper()
	clearSDKEnv(t)
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		Backend:     genai.BackendVertexAI,
		Project:     testProject,
		Location:    testLocation,
		Credentials: auth.NewCredentials(&auth.CredentialsOptions{TokenProvider: src}),
		HTTPOptions: genai.HTTPOptions{BaseURL: "ws://" + addr + "/"},
	})
	if err != nil {
		t.Fatalf("new genai vertex client: %v", err)
	}
	return c
}

// staticToken is an access token source that never calls Google.
type staticToken string

func (s staticToken) Token(context.Context) (*auth.Token, error) {
	return &auth.Token{Value: string(s), Type: "Bearer"}, nil
}

// connect opens a session that the test closes when it ends.
func connect(t testing.TB, m *geminilive.Model, cfg transport.LiveConfig) transport.LiveSession {
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

// receiver calls Recv from one goroutine, as a voice session does, and
// hands the events over a channel so that tests can wait with a timeout.
type receiver struct {
	events chan transport.LiveEvent
	done   chan struct{} // closed when Recv has returned an error
	err    error         // that error, set before done is closed
}

// receive starts the receiver of s; the test's end closes s and waits for
// the receiver.
func receive(t *testing.T, s transport.LiveSession) *receiver {
	t.Helper()
	r := &receiver{events: make(chan transport.LiveEvent), done: make(chan struct{})}
	stop := make(chan struct{})
	go func() {
		defer close(r.done)
		for {
			ev, err := s.Recv()
			if err != nil {
				r.err = err
				return
			}
			ev.Audio = bytes.Clone(ev.Audio) // valid only until the next Recv
			select {
			case r.events <- ev:
			case <-stop:
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		_ = s.Close()
		<-r.done
	})
	return r
}

// nextEvent waits for the next event; it fails the test if the session
// ends or nothing arrives in time.
func nextEvent(t *testing.T, r *receiver) transport.LiveEvent {
	t.Helper()
	select {
	case ev := <-r.events:
		return ev
	case <-r.done:
		t.Fatalf("the session ended early: %v", r.err)
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
	}
	return transport.LiveEvent{}
}

// waitEnd collects events until Recv fails and returns them and the error.
func waitEnd(t *testing.T, r *receiver) ([]transport.LiveEvent, error) {
	t.Helper()
	var evs []transport.LiveEvent
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev := <-r.events:
			evs = append(evs, ev)
		case <-r.done:
			return evs, r.err
		case <-timeout:
			t.Fatalf("the session still runs after 5s (got %d events)", len(evs))
		}
	}
}
