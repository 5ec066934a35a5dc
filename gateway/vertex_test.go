package gateway_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/auth"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// End-to-end tests of Gemini through Vertex AI: a browser speaking
// protocol v1, the real gateway with GOOGLE_GENAI_USE_VERTEXAI, the real
// genai clients and the Live adapter, and the fake Gemini server's Vertex
// AI paths as the endpoint (GEMINI_BASE_URL).

const (
	vertexProject  = "acme-support"
	vertexLocation = "europe-west4"
	vertexToken    = "ya29.injected-token"
)

// vertexFake is a fake Gemini server (strict: a malformed request fails
// the test) that the gateway reaches as Vertex AI.
type vertexFake struct {
	base string // http://127.0.0.1:port/
	text *fakegemini.ScriptBrain
	live *fakegemini.LiveScript
}

func startVertexFake(t *testing.T, text *fakegemini.ScriptBrain) *vertexFake {
	t.Helper()
	srv := fakegemini.New(text, nil)
	live := fakegemini.NewLiveScript()
	srv.SetLiveBrain(live)
	fakegemini.Strict(t, srv)
	base, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return &vertexFake{base: base, text: text, live: live}
}

// vertexConfig is the configuration of a gateway on Vertex AI with base as
// its endpoint, loaded as the binary loads it.
func vertexConfig(t *testing.T, base string) gateway.Config {
	t.Helper()
	cfg := defaultTestConfig(t) // also clears the SDK's backend variable
	for _, v := range []string{"GOOGLE_VERTEX_BASE_URL", "GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_CLOUD_PROJECT",
		"GOOGLE_CLOUD_LOCATION", "GOOGLE_CLOUD_REGION", "GOOGLE_APPLICATION_CREDENTIALS"} {
		t.Setenv(v, "")
	}
	v, err := loadConfig(nil, configEnv(vertexEnv(base)), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	v.ShutdownTimeout = cfg.ShutdownTimeout
	return v
}

// vertexEnv is the environment of a gateway on Vertex AI with base as its
// endpoint.
func vertexEnv(base string) map[string]string {
	return map[string]string{"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_CLOUD_PROJECT": vertexProject,
		"GOOGLE_CLOUD_LOCATION": vertexLocation, "GEMINI_BASE_URL": base, "TURNSTILE_ADDR": "127.0.0.1:0"}
}

// staticToken is an access token source that never calls Google.
type staticToken string

func (s staticToken) Token(context.Context) (*auth.Token, error) {
	return &auth.Token{Value: string(s), Type: "Bearer"}, nil
}

func staticCredentials(token string) *auth.Credentials {
	return auth.NewCredentials(&auth.CredentialsOptions{TokenProvider: staticToken(token)})
}

// checkVertexRequests checks that every text request reached the Vertex AI
// path of the project and location, with the bearer token and no key.
func checkVertexRequests(t *testing.T, reqs []*fakegemini.Request, token string) {
	t.Helper()
	if len(reqs) == 0 {
		t.Fatal("the model got no request")
	}
	for i, r := range reqs {
		if r.API != fakegemini.VertexAI || r.Project != vertexProject || r.Location != vertexLocation || r.Model != "gemini-2.5-flash" {
			t.Errorf("request %d: api %q project %q location %q model %q", i, r.API, r.Project, r.Location, r.Model)
		}
		if got := r.Header.Get("Authorization"); got != "Bearer "+token || r.Header.Get("x-goog-api-key") != "" {
			t.Errorf("request %d: Authorization %q, key %q; want the bearer token only", i, got, r.Header.Get("x-goog-api-key"))
		}
	}
}

func TestTextTurnThroughVertexAI(t *testing.T) {
	f := startVertexFake(t, fakegemini.NewScript(callStep(searchCall("shipping")), textStep("Beans ship in two days.")))
	g := startGatewayWith(t, vertexConfig(t, f.base), brains{credentials: staticCredentials(vertexToken)})

	c := g.dial("", nil)
	ready := c.start(nil)
	if m, _ := ready["model"].(map[string]any); m["offline"] != false || m["name"] != "gemini-2.5-flash" {
		t.Fatalf("session.ready model = %v, want gemini-2.5-flash, not offline", ready["model"])
	}
	evs := c.ask("How fast do you ship?")
	if res := ofType(evs, "tool.result"); len(res) != 1 || res[0]["ok"] != true {
		t.Fatalf("kb_search: %v", res)
	}
	if done := ofType(evs, "text.done"); len(done) != 1 || done[0].str("text") != "Beans ship in two days." {
		t.Fatalf("answer: %v", evs)
	}
	reqs := f.text.Requests()
	checkVertexRequests(t, reqs, vertexToken)
	if rs := lastResponses(t, reqs[1]); len(rs) != 1 || rs[0].Name != "kb_search" {
		t.Fatalf("function responses sent to Vertex AI: %v", rs)
	}
}

func TestVoiceTurnThroughVertexAI(t *testing.T) {
	f := startVertexFake(t, fakegemini.NewScript())
	g := startGatewayWith(t, vertexConfig(t, f.base), brains{credentials: staticCredentials(vertexToken)})
	c, _, u := startInVoice(t, g, f.live)

	if u.API != fakegemini.VertexAI || u.APIVersion != "v1beta1" {
		t.Fatalf("the Live session reached the %s API %s, want Vertex AI v1beta1", u.API, u.APIVersion)
	}
	if got := u.Header.Get("Authorization"); got != "Bearer "+vertexToken {
		t.Errorf("Live handshake Authorization %q", got)
	}
	want := "projects/" + vertexProject + "/locations/" + vertexLocation + "/publishers/google/models/" + g.cfg.LiveModel
	if u.Setup.ModelName != want {
		t.Errorf("setup model %q, want %q", u.Setup.ModelName, want)
	}

	// Microphone → model, a tool call, model → browser.
	spoken := pcm(1, 3200)
	if err := c.sendAudio(spoken); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the microphone audio upstream", func() bool { return bytes.Equal(u.audio(), spoken) })
	if _, err := u.SendToolCall(searchCall("shipping")); err != nil {
		t.Fatal(err)
	}
	if rs := u.waitResponses(1); rs[0].Name != "kb_search" {
		t.Fatalf("tool response upstream: %v", rs)
	}
	answer := pcm(2, 4800)
	must(t, u.SendOutputTranscript("Two days."))
	must(t, u.SendAudio(answer))
	must(t, u.SendTurnComplete(nil))
	fs := c.recvUntil("turn.done")
	if !bytes.Equal(audioOf(fs), answer) {
		t.Fatalf("browser heard %d bytes, the model spoke %d", len(audioOf(fs)), len(answer))
	}
	if end := last(events(fs)); end.str("reason") != "end_turn" {
		t.Fatalf("turn.done = %v", end)
	}
}

// tokenServer plays Google's OAuth token endpoint for a service account: it
// checks the signed JWT assertion against the account's public key and
// hands out an access token.
type tokenServer struct {
	url   string
	key   *rsa.PublicKey
	email string

	mu     sync.Mutex
	issued int
	errs   []string
}

func (s *tokenServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		http.Error(w, `{"error":"unsupported_grant_type"}`, http.StatusBadRequest)
		return
	}
	if problem := s.checkAssertion(r.Form.Get("assertion")); problem != "" {
		s.mu.Lock()
		s.errs = append(s.errs, problem)
		s.mu.Unlock()
		http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.issued++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"access_token":"ya29.from-adc","token_type":"Bearer","expires_in":3600}`)
}

func (s *tokenServer) checkAssertion(jwt string) string {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return "assertion is not a JWT"
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return "bad signature encoding"
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(s.key, crypto.SHA256, sum[:], sig); err != nil {
		return "signature does not verify: " + err.Error()
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "bad payload encoding"
	}
	var claims struct {
		Iss, Scope, Aud string
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return "bad claims: " + err.Error()
	}
	if claims.Iss != s.email || claims.Aud != s.url || !strings.Contains(claims.Scope, vertexScope) {
		return "claims " + string(payload)
	}
	return ""
}

// Production path: no injected credentials, so the gateway finds
// application default credentials itself (GOOGLE_APPLICATION_CREDENTIALS, a
// service account key file), trades a signed assertion for an access token
// at the file's token endpoint, and sends that token to Vertex AI.
func TestVertexAIWithApplicationDefaultCredentials(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	ts := &tokenServer{key: &key.PublicKey, email: "gateway@" + vertexProject + ".iam.gserviceaccount.com"}
	srv := httptest.NewServer(ts)
	t.Cleanup(srv.Close)
	ts.url = srv.URL + "/token"
	file, err := json.Marshal(map[string]string{
		"type": "service_account", "project_id": vertexProject, "private_key_id": "key-1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": ts.email, "client_id": "1", "token_uri": ts.url,
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "service-account.json")
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}

	f := startVertexFake(t, fakegemini.NewScript(textStep("Beans ship in two days.")))
	cfg := vertexConfig(t, f.base)
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", path)
	g := startGatewayWith(t, cfg, brains{})

	c := g.dial("", nil)
	c.start(nil)
	if evs := c.ask("How fast do you ship?"); last(evs).str("reason") != "end_turn" {
		t.Fatalf("turn: %v", evs)
	}
	checkVertexRequests(t, f.text.Requests(), "ya29.from-adc")
	c.send(map[string]any{"type": "voice.start"})
	u := nextUpstream(t, f.live)
	if got := u.Header.Get("Authorization"); got != "Bearer ya29.from-adc" {
		t.Errorf("Live handshake Authorization %q, want the token from ADC", got)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.errs) > 0 || ts.issued == 0 {
		t.Fatalf("token endpoint: issued %d, problems %v", ts.issued, ts.errs)
	}
}

func TestVertexAIWithoutCredentialsStopsTheGateway(t *testing.T) {
	f := startVertexFake(t, fakegemini.NewScript())
	vertexConfig(t, f.base) // clears the SDK's variables
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "missing.json"))
	out, err := runGateway(t, vertexEnv(f.base))
	if err == nil || !strings.Contains(err.Error(), "application default credentials") ||
		!strings.Contains(err.Error(), "GOOGLE_APPLICATION_CREDENTIALS") {
		t.Fatalf("serve = %v, want a credentials error; log:\n%s", err, out)
	}
}
