package geminilive

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"cloud.google.com/go/auth"
	"google.golang.org/genai"
)

// The endpoint follows the SDK's Live.Connect (the wire test checks the
// plain case against the SDK itself).
func TestEndpointIsWhereTheSDKWouldConnect(t *testing.T) {
	const path = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
	cases := []struct {
		name             string
		cc               genai.ClientConfig
		url, header, val string
	}{
		{"ws base URL", cc("ws://127.0.0.1:9/", "k", "v1beta"), "ws://127.0.0.1:9" + path, "x-goog-api-key", "k"},
		{"http becomes wss", cc("http://127.0.0.1:9/", "k", "v1beta"), "wss://127.0.0.1:9" + path, "x-goog-api-key", "k"},
		{"Google's endpoint", cc("https://generativelanguage.googleapis.com/", "k", "v1beta"),
			"wss://generativelanguage.googleapis.com" + path, "x-goog-api-key", "k"},
		{"base path kept, query dropped", cc("wss://proxy.example/gemini/?x=1", "k", "v1beta"),
			"wss://proxy.example/gemini" + path, "x-goog-api-key", "k"},
		{"ephemeral token", cc("wss://h/", "auth_tokens/abc", "v1alpha"),
			"wss://h/ws/google.ai.generativelanguage.v1alpha.GenerativeService.BidiGenerateContentConstrained",
			"Authorization", "Token auth_tokens/abc"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cc.HTTPOptions.Headers = http.Header{"X-Extra": {"1"}}
			ep, err := newEndpoint(tc.cc, "m")
			if err != nil {
				t.Fatal(err)
			}
			if ep.url != tc.url || ep.header.Get(tc.header) != tc.val || ep.header.Get("X-Extra") != "1" {
				t.Errorf("endpoint = %s %v, want %s with %s: %s and X-Extra", ep.url, ep.header, tc.url, tc.header, tc.val)
			}
			if ep.model != "models/m" {
				t.Errorf("setup model = %q, want models/m", ep.model)
			}
		})
	}
	for name, c := range map[string]genai.ClientConfig{
		"Vertex AI without credentials": vertexCC("wss://h/", "p", "l", nil),
		"Vertex AI without project":     vertexCC("wss://h/", "", "l", staticCreds("t")),
		"Vertex AI without location":    vertexCC("wss://h/", "p", "", staticCreds("t")),
		"no API key":                    cc("wss://h/", "", "v1beta"),
		"no API version":                cc("wss://h/", "k", ""),
		"ephemeral token, not alpha":    cc("wss://h/", "auth_tokens/abc", "v1beta"),
	} {
		if _, err := newEndpoint(c, "m"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func cc(base, key, version string) genai.ClientConfig {
	return genai.ClientConfig{Backend: genai.BackendGeminiAPI, APIKey: key,
		HTTPOptions: genai.HTTPOptions{BaseURL: base, APIVersion: version}}
}

func vertexCC(base, project, location string, creds *auth.Credentials) genai.ClientConfig {
	return genai.ClientConfig{Backend: genai.BackendVertexAI, Project: project, Location: location, Credentials: creds,
		HTTPOptions: genai.HTTPOptions{BaseURL: base, APIVersion: "v1beta1"}}
}

// countingToken hands out "t1", "t2", …: a new token per call, as
// credentials do once a token has expired.
type countingToken struct{ n int }

func (c *countingToken) Token(context.Context) (*auth.Token, error) {
	c.n++
	return &auth.Token{Value: "t" + strconv.Itoa(c.n), Type: "Bearer"}, nil
}

type staticToken string

func (s staticToken) Token(context.Context) (*auth.Token, error) {
	return &auth.Token{Value: string(s), Type: "Bearer"}, nil
}

func staticCreds(tok string) *auth.Credentials {
	return auth.NewCredentials(&auth.CredentialsOptions{TokenProvider: staticToken(tok)})
}

// On Vertex AI the endpoint follows the SDK's Live.Connect too: the
// LlmBidiService path under the base path, no API key, the model's full
// resource name, and a bearer token asked of the credentials on every
// connect (the wire test checks this against the SDK itself).
func TestVertexEndpointIsWhereTheSDKWouldConnect(t *testing.T) {
	src := &countingToken{}
	c := vertexCC("https://europe-west4-aiplatform.googleapis.com/", "proj", "europe-west4",
		auth.NewCredentials(&auth.CredentialsOptions{TokenProvider: src}))
	c.HTTPOptions.Headers = http.Header{"X-Extra": {"1"}}
	ep, err := newEndpoint(c, "gemini-live-2.5-flash")
	if err != nil {
		t.Fatal(err)
	}
	const wantURL = "wss://europe-west4-aiplatform.googleapis.com/ws/google.cloud.aiplatform.v1beta1.LlmBidiService/BidiGenerateContent"
	if ep.url != wantURL {
		t.Errorf("url = %s, want %s", ep.url, wantURL)
	}
	if ep.model != "projects/proj/locations/europe-west4/publishers/google/models/gemini-live-2.5-flash" {
		t.Errorf("setup model = %q", ep.model)
	}
	for i, want := range []string{"Bearer t1", "Bearer t2"} {
		h, err := ep.handshakeHeader(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if h.Get("Authorization") != want || h.Get("X-Extra") != "1" || h.Get("x-goog-api-key") != "" {
			t.Errorf("connect %d: header %v, want Authorization %q, X-Extra and no API key", i+1, h, want)
		}
	}
	if ep.header.Get("Authorization") != "" {
		t.Error("a connect's token leaked into the endpoint's shared header")
	}
}

func TestVertexModelNamesFollowTheSDK(t *testing.T) {
	for in, want := range map[string]string{
		"gemini-live-2.5-flash":                        "projects/p/locations/l/publishers/google/models/gemini-live-2.5-flash",
		"models/gemini-live-2.5-flash":                 "projects/p/locations/l/publishers/google/models/gemini-live-2.5-flash",
		"publishers/google/models/x":                   "projects/p/locations/l/publishers/google/models/x",
		"meta/llama":                                   "projects/p/locations/l/publishers/meta/models/llama",
		"projects/q/locations/k/endpoints/e":           "projects/q/locations/k/endpoints/e",
		"projects/p/locations/l/publishers/g/models/m": "projects/p/locations/l/publishers/g/models/m",
	} {
		if got := vertexModelName("p", "l", in); got != want {
			t.Errorf("vertexModelName(%q) = %q, want %q", in, got, want)
		}
	}
}
