package fakegemini

import (
	"net/http"
	"strings"
)

// API names the public API a request came through. The fake serves both on
// the same port, told apart by their paths.
type API string

const (
	// GeminiAPI is the Gemini Developer API (generativelanguage.googleapis.com):
	// REST at /{v1|v1beta|v1alpha}/models/{model}:{method}, Live at
	// /ws/google.ai.generativelanguage.{version}.GenerativeService.BidiGenerateContent,
	// authenticated by an API key (x-goog-api-key header or ?key=).
	GeminiAPI API = "gemini"
	// VertexAI is Vertex AI (aiplatform.googleapis.com): REST at
	// /{v1|v1beta1}/projects/{p}/locations/{l}/publishers/{pub}/models/{model}:{method},
	// Live at /ws/google.cloud.aiplatform.{version}.LlmBidiService/BidiGenerateContent,
	// authenticated by an OAuth access token (Authorization: Bearer ...).
	VertexAI API = "vertex"
)

// Messages Google's front ends answer for missing credentials.
const (
	msgNoAPIKey = "Method doesn't allow unregistered callers (callers without established identity). " +
		"Please use API key or other form of API consumer identity to call this API."
	msgNoBearer = "Request is missing required authentication credential. Expected OAuth 2 access token, " +
		"login cookie or other valid authentication credential. " +
		"See https://developers.google.com/identity/sign-in/web/devconsole-project."
)

// apiVersionServed reports whether api serves version. The Gemini API has
// v1 (the JS SDK's default since 3.x), v1beta (the Go SDK's) and v1alpha;
// Vertex AI has v1 and v1beta1 (the SDKs' default).
func apiVersionServed(api API, version string) bool {
	switch api {
	case GeminiAPI:
		return version == "v1" || version == "v1beta" || version == "v1alpha"
	case VertexAI:
		return version == "v1" || version == "v1beta1"
	}
	return false
}

// hasAPIKey reports whether r carries a Gemini API key, in the header the
// SDKs send or in the ?key= of the raw-protocol docs (and of the JS SDK's
// Live URL).
func hasAPIKey(r *http.Request) bool {
	return r.Header.Get("x-goog-api-key") != "" || r.URL.Query().Get("key") != ""
}

// bearerToken returns the OAuth access token of r's Authorization header.
func bearerToken(r *http.Request) (string, bool) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return tok, ok && tok != ""
}

// vertexModel splits a Vertex model resource name,
// "projects/{p}/locations/{l}/publishers/{pub}/models/{model}", into its
// project, location and model id.
func vertexModel(name string) (project, location, model string, ok bool) {
	parts := strings.Split(name, "/")
	if len(parts) != 8 || parts[0] != "projects" || parts[2] != "locations" || parts[4] != "publishers" || parts[6] != "models" {
		return "", "", "", false
	}
	for _, p := range parts {
		if p == "" {
			return "", "", "", false
		}
	}
	return parts[1], parts[3], parts[7], true
}

// cleanSlashes collapses runs of slashes in a request path. The JS SDK
// builds its Live URL by appending "/ws/..." to a base URL that ends in a
// slash, so it asks for "//ws/..."; the real endpoint accepts that, while
// http.ServeMux would answer it with a redirect that a WebSocket client
// does not follow.
func cleanSlashes(p string) string {
	if !strings.Contains(p, "//") {
		return p
	}
	var b strings.Builder
	b.Grow(len(p))
	for i := 0; i < len(p); i++ {
		if p[i] == '/' && i > 0 && p[i-1] == '/' {
			continue
		}
		b.WriteByte(p[i])
	}
	return b.String()
}
