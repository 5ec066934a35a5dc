package fakegemini

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
	"google.golang.org/genai"
)

// TestLiveAcceptsTheDoubleSlashPathTheJSSDKBuilds dials the URL the JS SDK
// builds from a base URL ending in "/" ("ws://host:port//ws/...", key in
// the query): the real endpoint accepts it, and a redirect would fail the
// WebSocket handshake.
func TestLiveAcceptsTheDoubleSlashPathTheJSSDKBuilds(t *testing.T) {
	for _, version := range []string{"v1", "v1beta", "v1alpha"} {
		t.Run(version, func(t *testing.T) {
			brain := NewLiveScript()
			_, base := startLive(t, brain)
			u := base + "/ws/google.ai.generativelanguage." + version + ".GenerativeService.BidiGenerateContent?key=k"
			if !strings.Contains(u, "//ws/") {
				t.Fatalf("test URL %s has no double slash", u)
			}
			conn, resp, err := websocket.DefaultDialer.Dial(u, nil)
			if err != nil {
				t.Fatalf("dial %s: %v (response %+v)", u, err, resp)
			}
			_ = resp.Body.Close()
			t.Cleanup(func() { _ = conn.Close() })
			if err := conn.WriteMessage(websocket.TextMessage, []byte(`{"setup":{"model":"models/m"}}`)); err != nil {
				t.Fatalf("write setup: %v", err)
			}
			if _, data, err := conn.ReadMessage(); err != nil || string(data) != `{"setupComplete":{}}` {
				t.Fatalf("got %s %v, want setupComplete", data, err)
			}
			if s := takeSession(t, brain); s.APIVersion != version || s.API != GeminiAPI {
				t.Errorf("session API %q version %q, want gemini %s", s.API, s.APIVersion, version)
			}
		})
	}
}

func TestRESTAcceptsDoubleSlashesWithoutRedirecting(t *testing.T) {
	_, base := startServer(t, NewScript(Fixed(TextReply("ok", 1))))
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	req, err := http.NewRequestWithContext(testContext(t), "POST", base+"/v1beta//models/m:generateContent",
		strings.NewReader(`{"contents":[{"parts":[{"text":"hi"}],"role":"user"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-goog-api-key", "k")
	hc := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("do: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200 without a redirect", resp.StatusCode)
	}
}

// TestAPIVersionV1WorksForRESTAndLive drives both halves with the Go SDK
// set to v1, the JS SDK's default since its 3.x.
func TestAPIVersionV1WorksForRESTAndLive(t *testing.T) {
	brain := NewScript(Fixed(TextReply("Hello from v1.", 2)))
	srv, base := startServer(t, brain)
	live := NewLiveScript()
	srv.SetLiveBrain(live)
	for _, v := range []string{"GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE", "GOOGLE_GEMINI_BASE_URL",
		"GOOGLE_VERTEX_BASE_URL", "GOOGLE_API_KEY", "GEMINI_API_KEY"} {
		t.Setenv(v, "")
	}
	newV1 := func(base string) *genai.Client {
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
			Backend: genai.BackendGeminiAPI, APIKey: "k", HTTPClient: &http.Client{Transport: tr},
			HTTPOptions: genai.HTTPOptions{BaseURL: base, APIVersion: "v1"},
		})
		if err != nil {
			t.Fatalf("client: %v", err)
		}
		return c
	}

	resps, err := collect(newV1(base).Models.GenerateContentStream(testContext(t), testModel, genai.Text("hi"), nil))
	if err != nil || len(resps) != 2 || resps[0].Text()+resps[1].Text() != "Hello from v1." {
		t.Fatalf("REST on v1: %d chunks, %v", len(resps), err)
	}
	if r := brain.Requests()[0]; r.APIVersion != "v1" || r.API != GeminiAPI {
		t.Errorf("request API %q version %q, want gemini v1", r.API, r.APIVersion)
	}

	sess, err := newV1(wsBase(base)).Live.Connect(context.Background(), liveModel, nil)
	if err != nil {
		t.Fatalf("Live on v1: %v", err)
	}
	defer sess.Close()
	if s := takeSession(t, live); s.APIVersion != "v1" {
		t.Errorf("Live session version %q, want v1", s.APIVersion)
	}
}

func TestCleanSlashesCollapsesRuns(t *testing.T) {
	for in, want := range map[string]string{
		"/ws/x": "/ws/x", "//ws/x": "/ws/x", "/v1beta///models//m:x": "/v1beta/models/m:x", "/": "/", "//": "/",
	} {
		if got := cleanSlashes(in); got != want {
			t.Errorf("cleanSlashes(%q) = %q, want %q", in, got, want)
		}
	}
}
