package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/credentials"
	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/internal/settings"
	"github.com/turnstile-gw/turnstile/transport/geminilive"
)

// vertexScope is the OAuth scope Vertex AI needs.
const vertexScope = "https://www.googleapis.com/auth/cloud-platform"

// vertexClients builds the genai clients for Gemini through Vertex AI:
// project and location from the configuration, one set of credentials
// shared by both (application default credentials unless a test injects
// its own), and GEMINI_BASE_URL, when set, as the endpoint of both.
func vertexClients(ctx context.Context, cfg Config, log *slog.Logger, creds *auth.Credentials) (*genai.Client, *genai.Client, error) {
	if creds == nil {
		var err error
		creds, err = credentials.DetectDefault(&credentials.DetectOptions{Scopes: []string{vertexScope}})
		if err != nil {
			return nil, nil, fmt.Errorf("vertex AI (GOOGLE_GENAI_USE_VERTEXAI=true) needs application default credentials: %w; "+
				"set GOOGLE_APPLICATION_CREDENTIALS to a service account key file, run `gcloud auth application-default login`, "+
				"or run on Google Cloud with a service account attached", err)
		}
	}
	base := string(cfg.GeminiBaseURL)
	rest, err := genai.NewClient(ctx, &genai.ClientConfig{
		Backend: genai.BackendVertexAI, Project: cfg.VertexProject, Location: cfg.VertexLocation, Credentials: creds,
		HTTPOptions: genai.HTTPOptions{BaseURL: base},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("vertex AI client: %w", err)
	}
	// The Live client is only a configuration for geminilive, which asks
	// creds for a token on every connect. Its own HTTP client keeps the SDK
	// from wrapping creds in a second token cache (the REST client above
	// already put one around them).
	live, err := genai.NewClient(ctx, &genai.ClientConfig{
		Backend: genai.BackendVertexAI, Project: cfg.VertexProject, Location: cfg.VertexLocation, Credentials: creds,
		HTTPClient: &http.Client{}, HTTPOptions: genai.HTTPOptions{BaseURL: geminilive.BaseURL(base)},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("vertex AI live client: %w", err)
	}
	endpoint := rest.ClientConfig().HTTPOptions.BaseURL
	log.Info("Gemini through Vertex AI", "project", cfg.VertexProject, "location", cfg.VertexLocation,
		"endpoint", settings.RedactURL(endpoint), "text_model", cfg.TextModel, "live_model", cfg.LiveModel)
	return rest, live, nil
}
