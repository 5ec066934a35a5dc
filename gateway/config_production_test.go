package gateway

import (
	"strings"
	"testing"
)

func TestOfflineDemoRefusedOffLoopbackUnlessAskedFor(t *testing.T) {
	public := map[string]string{"TURNSTILE_ADDR": "0.0.0.0:8080", "TURNSTILE_AUTH_SECRET": testAuthSecret}
	with := func(kv map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range public {
			out[k] = v
		}
		for k, v := range kv {
			out[k] = v
		}
		return out
	}
	vertex := map[string]string{"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_CLOUD_PROJECT": "p", "GOOGLE_CLOUD_LOCATION": "us-central1"}
	cases := []struct {
		name    string
		env     map[string]string
		refused []string // what the error says; nil: accepted
	}{
		{"no credentials", with(nil), []string{"TURNSTILE_ADDR=0.0.0.0:8080", "offline demo model would answer text and voice",
			"GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI=true", "TURNSTILE_DEMO=true"}},
		{"every interface, no host", with(map[string]string{"TURNSTILE_ADDR": ":8080"}), []string{"TURNSTILE_ADDR=:8080", "not loopback"}},
		{"a demo on purpose", with(map[string]string{"TURNSTILE_DEMO": "true"}), nil},
		{"a Gemini key", with(map[string]string{"GEMINI_API_KEY": "k"}), nil},
		{"Vertex AI", with(vertex), nil},
		{"openai text without its server", with(map[string]string{"TURNSTILE_TEXT_PROVIDER": "openai", "GEMINI_API_KEY": "k"}),
			[]string{"text turns (TURNSTILE_TEXT_PROVIDER=openai without OPENAI_API_KEY or OPENAI_BASE_URL)"}},
		{"openai text, voice without Gemini", with(map[string]string{"TURNSTILE_TEXT_PROVIDER": "openai", "OPENAI_BASE_URL": "http://llm:8000/v1"}),
			[]string{"would answer voice (Gemini Live)"}},
		{"openai text and Gemini voice", with(map[string]string{"TURNSTILE_TEXT_PROVIDER": "openai", "OPENAI_API_KEY": "sk", "GEMINI_API_KEY": "k"}), nil},
		{"openai demo on purpose", with(map[string]string{"TURNSTILE_TEXT_PROVIDER": "openai", "TURNSTILE_DEMO": "1"}), nil},
		{"loopback stays the offline demo", map[string]string{}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadTestConfig(t, nil, tc.env)
			if tc.refused == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted (offline %v), want refused", c.Offline())
			}
			for _, w := range tc.refused {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
		})
	}
}

func TestDemoFlagAllowsThePublicDemo(t *testing.T) {
	c, err := loadTestConfig(t, []string{"-demo=true", "-addr", "0.0.0.0:8080"}, map[string]string{"TURNSTILE_AUTH_SECRET": testAuthSecret})
	if err != nil || !c.Demo || !c.Offline() {
		t.Fatalf("-demo=true: demo %v offline %v, %v", c.Demo, c.Offline(), err)
	}
}

func TestVertexAISettings(t *testing.T) {
	c, err := loadTestConfig(t, []string{"-google-genai-use-vertexai=1", "-google-cloud-project=acme-prod",
		"-google-cloud-location=europe-west4"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.UseVertexAI || c.VertexProject != "acme-prod" || c.VertexLocation != "europe-west4" || c.GeminiOffline() || c.Offline() {
		t.Fatalf("vertex config %+v: offline %v", c, c.Offline())
	}

	for name, tc := range map[string]struct {
		env  map[string]string
		want []string
	}{
		"no project or location": {map[string]string{"GOOGLE_GENAI_USE_VERTEXAI": "true"},
			[]string{"GOOGLE_CLOUD_PROJECT: GOOGLE_GENAI_USE_VERTEXAI=true needs it", "GOOGLE_CLOUD_LOCATION: GOOGLE_GENAI_USE_VERTEXAI=true needs it"}},
		"an API key as well": {map[string]string{"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_CLOUD_PROJECT": "p",
			"GOOGLE_CLOUD_LOCATION": "l", "GEMINI_API_KEY": "AIza-secret"}, []string{"GEMINI_API_KEY: set together with GOOGLE_GENAI_USE_VERTEXAI=true"}},
		"not a boolean": {map[string]string{"GOOGLE_GENAI_USE_VERTEXAI": "vertex"}, []string{"GOOGLE_GENAI_USE_VERTEXAI=vertex: must be true or false"}},
		"a path in the project": {map[string]string{"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_CLOUD_PROJECT": "p/../q",
			"GOOGLE_CLOUD_LOCATION": "l"}, []string{"GOOGLE_CLOUD_PROJECT=p/../q: has a slash"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadTestConfig(t, nil, tc.env)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
			if strings.Contains(err.Error(), "AIza-secret") {
				t.Errorf("error shows the key: %v", err)
			}
		})
	}
	// Project and location without Vertex AI are simply unused.
	if _, err := loadTestConfig(t, nil, map[string]string{"GOOGLE_CLOUD_PROJECT": "p", "GOOGLE_CLOUD_LOCATION": "l"}); err != nil {
		t.Fatalf("project and location alone: %v", err)
	}
}
