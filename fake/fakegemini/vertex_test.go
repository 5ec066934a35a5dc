package fakegemini

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/httptransport"
	"github.com/gorilla/websocket"
	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/internal/testwait"
)

const (
	vertexProject  = "demo-project"
	vertexLocation = "europe-west4"
	vertexToken    = "ya29.fake-access-token"
)

// staticToken is an OAuth token source that never calls Google.
type staticToken string

func (s staticToken) Token(context.Context) (*auth.Token, error) {
	return &auth.Token{Value: string(s), Type: "Bearer"}, nil
}

// newVertexClient returns a genai client on the Vertex AI backend aimed at
// base, with a static access token injected as its credentials: the SDK
// then wraps its own HTTP client to send "Authorization: Bearer" on REST
// and sets the same header on the Live handshake.
func newVertexClient(t *testing.T, base string) *genai.Client {
	t.Helper()
	return newVertexClientWith(t, base, nil)
}

// newVertexClientWith is newVertexClient with the caller's HTTP client (nil
// for the SDK's). The SDK adds no credentials to a client it is given: the
// caller wraps it with httptransport.AddAuthorizationMiddleware.
func newVertexClientWith(t *testing.T, base string, hc *http.Client) *genai.Client {
	t.Helper()
	creds := auth.NewCredentials(&auth.CredentialsOptions{TokenProvider: staticToken(vertexToken)})
	if hc != nil {
		if err := httptransport.AddAuthorizationMiddleware(hc, creds); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []string{"GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE", "GOOGLE_GEMINI_BASE_URL",
		"GOOGLE_VERTEX_BASE_URL", "GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_CLOUD_PROJECT",
		"GOOGLE_CLOUD_LOCATION", "GOOGLE_CLOUD_REGION", "GOOGLE_APPLICATION_CREDENTIALS"} {
		t.Setenv(v, "")
	}
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		Backend:     genai.BackendVertexAI,
		Project:     vertexProject,
		Location:    vertexLocation,
		Credentials: creds,
		HTTPClient:  hc,
		HTTPOptions: genai.HTTPOptions{BaseURL: base},
	})
	if err != nil {
		t.Fatalf("new vertex client: %v", err)
	}
	return c
}

func TestVertexStreamingWithABearerToken(t *testing.T) {
	t.Run("the SDK's HTTP client", func(t *testing.T) { testVertexStreaming(t, nil) })
	t.Run("an own HTTP client with the auth middleware", func(t *testing.T) {
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		testVertexStreaming(t, &http.Client{Transport: tr})
	})
}

func testVertexStreaming(t *testing.T, hc *http.Client) {
	brain := NewScript(
		Fixed(CallReply(Call{Name: "kb_search", Args: map[string]any{"query": "refunds"}})),
		Fixed(TextReply("Refunds take five days.", 2)),
	)
	_, base := startServer(t, brain)
	c := newVertexClientWith(t, base, hc)
	ctx := testContext(t)

	contents := genai.Text("How do refunds work?")
	cfg := &genai.GenerateContentConfig{Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{
		Name: "kb_search", ParametersJsonSchema: map[string]any{"type": "object"},
	}}}}}
	resps, err := collect(c.Models.GenerateContentStream(ctx, "gemini-2.5-flash", contents, cfg))
	if err != nil {
		t.Fatalf("first stream: %v", err)
	}
	calls := resps[0].FunctionCalls()
	if len(calls) != 1 || calls[0].Name != "kb_search" || calls[0].Args["query"] != "refunds" {
		t.Fatalf("calls = %+v, want kb_search{query: refunds}", calls)
	}
	contents = append(contents, resps[0].Candidates[0].Content,
		genai.NewContentFromFunctionResponse("kb_search", map[string]any{"output": "five days"}, genai.RoleUser))
	resps, err = collect(c.Models.GenerateContentStream(ctx, "gemini-2.5-flash", contents, cfg))
	if err != nil || len(resps) != 2 || resps[0].Text()+resps[1].Text() != "Refunds take five days." {
		t.Fatalf("second stream: %d chunks, %v", len(resps), err)
	}

	for i, r := range brain.Requests() {
		if r.API != VertexAI || r.APIVersion != "v1beta1" || r.Project != vertexProject || r.Location != vertexLocation ||
			r.Model != "gemini-2.5-flash" || !r.Stream {
			t.Errorf("request %d: api %q version %q project %q location %q model %q stream %v", i, r.API, r.APIVersion,
				r.Project, r.Location, r.Model, r.Stream)
		}
		if got := r.Header.Get("Authorization"); got != "Bearer "+vertexToken {
			t.Errorf("request %d: Authorization %q, want the injected token", i, got)
		}
		if r.Header.Get("x-goog-api-key") != "" {
			t.Errorf("request %d carries an API key", i)
		}
	}
}

func TestVertexRESTWithoutTokenIs401(t *testing.T) {
	_, base := startServer(t, NewScript(Fixed(TextReply("never", 1))))
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	path := "v1beta1/projects/p/locations/l/publishers/google/models/m:streamGenerateContent?alt=sse"
	for name, header := range map[string][2]string{
		"no credentials":           {"", ""},
		"an API key is not enough": {"x-goog-api-key", "k"},
		"empty bearer":             {"Authorization", "Bearer "},
	} {
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(testContext(t), "POST", base+path,
				strings.NewReader(`{"contents":[{"parts":[{"text":"hi"}],"role":"user"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			if header[0] != "" {
				req.Header.Set(header[0], header[1])
			}
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				t.Fatalf("do: %v", err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", resp.StatusCode)
			}
		})
	}
}

func TestVertexLiveWithABearerToken(t *testing.T) {
	brain := NewLiveScript()
	_, base := startLive(t, brain)
	client := newVertexClient(t, base)
	sess, err := client.Live.Connect(context.Background(), "gemini-live-2.5-flash", &genai.LiveConnectConfig{
		ResponseModalities:       []genai.Modality{genai.ModalityAudio},
		OutputAudioTranscription: &genai.AudioTranscriptionConfig{},
	})
	if err != nil {
		t.Fatalf("vertex live connect: %v", err)
	}
	defer sess.Close()
	s := takeSession(t, brain)
	if s.API != VertexAI || s.APIVersion != "v1beta1" || s.Header.Get("Authorization") != "Bearer "+vertexToken {
		t.Errorf("session api %q version %q auth %q, want vertex v1beta1 with the token", s.API, s.APIVersion, s.Header.Get("Authorization"))
	}
	su := s.Setup
	wantName := "projects/" + vertexProject + "/locations/" + vertexLocation + "/publishers/google/models/gemini-live-2.5-flash"
	if su.ModelName != wantName || su.Model != "gemini-live-2.5-flash" || su.Project != vertexProject || su.Location != vertexLocation {
		t.Errorf("setup model %q (%q in %q/%q), want %q", su.ModelName, su.Model, su.Project, su.Location, wantName)
	}

	// Audio in, audio, transcript and usage out, decoded by the SDK's
	// Vertex converters.
	if err := sess.SendRealtimeInput(genai.LiveRealtimeInput{Audio: &genai.Blob{MIMEType: "audio/pcm;rate=16000", Data: speech(100e6)}}); err != nil {
		t.Fatalf("send audio: %v", err)
	}
	if ev := nextEvent(t, s); ev.Kind != EventAudio || len(ev.Data) != 3200 {
		t.Fatalf("brain got %s with %d bytes, want 100 ms of audio", ev.Kind, len(ev.Data))
	}
	pcm := synthMelody(answerMelody)[:4800]
	for _, err := range []error{s.SendAudio(pcm), s.SendOutputTranscript("Hello"),
		s.SendTurnComplete(&genai.UsageMetadata{PromptTokenCount: 5, ResponseTokenCount: 7, TotalTokenCount: 12,
			ResponseTokensDetails: []*genai.ModalityTokenCount{{Modality: genai.MediaModalityAudio, TokenCount: 7}}})} {
		if err != nil {
			t.Fatalf("emit: %v", err)
		}
	}
	var got []*genai.LiveServerMessage
	for {
		m, err := sess.Receive()
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		if m.SetupComplete != nil {
			continue
		}
		got = append(got, m)
		if isTurnComplete(m) {
			break
		}
	}
	if len(got) != 3 || got[0].ServerContent.ModelTurn == nil || len(got[0].ServerContent.ModelTurn.Parts[0].InlineData.Data) != len(pcm) ||
		got[1].ServerContent.OutputTranscription == nil || got[1].ServerContent.OutputTranscription.Text != "Hello" {
		t.Fatalf("messages = %s, want audio, transcript, turnComplete", describe(got))
	}
	u := got[2].UsageMetadata
	if u == nil || u.ResponseTokenCount != 7 || u.TotalTokenCount != 12 || len(u.ResponseTokensDetails) != 1 {
		t.Errorf("usage = %+v, want 7 response tokens after the SDK's Vertex conversion", u)
	}
}

func TestVertexLiveRefusesASetupWithoutAFullModelName(t *testing.T) {
	srv, base := startLive(t, NewLiveScript())
	Strict(&recorder{}, srv) // record, and check the record below
	u := base + "ws/google.cloud.aiplatform.v1beta1.LlmBidiService/BidiGenerateContent"
	conn := dialURL(t, u, map[string]string{"Authorization": "Bearer t"})
	_ = conn.WriteMessage(websocket.TextMessage, []byte(`{"setup":{"model":"models/gemini-live"}}`))
	if ce := rawCloseError(t, conn); ce.Code != 1007 {
		t.Errorf("close %d %q, want 1007", ce.Code, ce.Text)
	}
	testwait.For(t, "the violation", func() bool { return len(srv.Violations()) == 1 })
	if v := srv.Violations()[0]; !strings.Contains(v, "models/gemini-live") {
		t.Errorf("violation %q does not name the model", v)
	}
}

func TestVertexLiveWithoutTokenFailsTheHandshake(t *testing.T) {
	_, base := startLive(t, NewLiveScript())
	u := base + "ws/google.cloud.aiplatform.v1beta1.LlmBidiService/BidiGenerateContent"
	_, resp, err := websocket.DefaultDialer.Dial(u, map[string][]string{"x-goog-api-key": {"k"}})
	if err == nil {
		t.Fatal("handshake without a bearer token succeeded")
	}
	if resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("handshake response %+v, want 401", resp)
	}
	_ = resp.Body.Close()
}
