package geminilive

import (
	"net/http"
	"testing"

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
			ep, err := newEndpoint(tc.cc)
			if err != nil {
				t.Fatal(err)
			}
			if ep.url != tc.url || ep.header.Get(tc.header) != tc.val || ep.header.Get("X-Extra") != "1" {
				t.Errorf("endpoint = %s %v, want %s with %s: %s and X-Extra", ep.url, ep.header, tc.url, tc.header, tc.val)
			}
		})
	}
	for name, c := range map[string]genai.ClientConfig{
		"Vertex AI":                  {Backend: genai.BackendVertexAI, HTTPOptions: genai.HTTPOptions{BaseURL: "wss://h/", APIVersion: "v1beta1"}},
		"no API key":                 cc("wss://h/", "", "v1beta"),
		"no API version":             cc("wss://h/", "k", ""),
		"ephemeral token, not alpha": cc("wss://h/", "auth_tokens/abc", "v1beta"),
	} {
		if _, err := newEndpoint(c); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func cc(base, key, version string) genai.ClientConfig {
	return genai.ClientConfig{Backend: genai.BackendGeminiAPI, APIKey: key,
		HTTPOptions: genai.HTTPOptions{BaseURL: base, APIVersion: version}}
}
