package gateway_test

// Seed 004's size and token figures, end to end: responses are measured in
// characters and tokens estimated as ceil(chars / 4), so a non-ASCII answer
// is not over-counted as its UTF-8 bytes.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
)

func TestMetricsCountNonASCIIResultsAndPromptsInCharactersRoundedUp(t *testing.T) {
	const answer = "Grüße aus Köln — 東京の天気は晴れです 🌤️ ¡Olé!"
	svc := newAPIService(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"forecast": answer})
	})
	schema := fmt.Sprintf(`{
  "name": "weather",
  "category": "retrieval",
  "modes": ["text"],
  "redact": {"args": ["city"], "result": ["forecast"]},
  "http": {"url": "%s/weather", "method": "GET"},
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
}`, svc.URL)
	// 1001 characters, 2002 bytes: 251 tokens rounded up; 250 counted in
	// characters rounded down, 500 in bytes.
	prompt := strings.Repeat("é", 1001)
	cfg := configWith(t, map[string]string{
		"TURNSTILE_TOOLS_DIR":     toolsDir(t, map[string]string{"weather": schema}),
		"TURNSTILE_SYSTEM_PROMPT": prompt,
	})
	brain := fakegemini.NewScript(
		callStep(fakegemini.Call{Name: "weather", Args: map[string]any{"city": "Köln"}}),
		textStep("Sunny."),
	)
	g := startGateway(t, cfg, brain)
	c := g.dial("", nil)
	c.start(nil)
	c.ask("what's the weather?")

	// What the model was sent, as the gateway encodes it.
	sent := mustJSON(t, lastResponses(t, brain.Requests()[1])[0].Response)
	if !strings.Contains(sent, "東京") {
		t.Fatalf("the model was not sent the tool's answer: %s", sent)
	}
	chars, bytes := utf8.RuneCountInString(sent), len(sent)
	if chars%4 == 0 {
		t.Fatalf("the response is %d characters, a multiple of 4: pick an answer that shows the rounding", chars)
	}
	tokens := (chars + 3) / 4

	code, body := get(t, g.adminURL+"/metrics/summary")
	var sum struct {
		Tools map[string]struct {
			ResultChars  struct{ P50, P95, P99 float64 } `json:"result_chars"`
			ResultTokens struct {
				P95 int `json:"p95"`
			} `json:"result_tokens"`
		} `json:"tools"`
		ResponseSizes map[string]struct{ P50, P95 float64 } `json:"responseSizes"`
		Warn          int                                   `json:"resultSizeWarnChars"`
		Context       struct {
			SystemPromptTokens int `json:"systemPromptTokens"`
		} `json:"context"`
	}
	if err := json.Unmarshal([]byte(body), &sum); code != 200 || err != nil {
		t.Fatalf("/metrics/summary: HTTP %d, %v\n%s", code, err, body)
	}
	w := sum.Tools["weather"]
	if w.ResultChars.P50 != float64(chars) || w.ResultChars.P99 != float64(chars) {
		t.Errorf("summary result_chars = %+v, want the response's %d characters (it is %d bytes)", w.ResultChars, chars, bytes)
	}
	if rs := sum.ResponseSizes["weather"]; rs.P50 != float64(chars) || rs.P95 != float64(chars) {
		t.Errorf("summary responseSizes = %+v, want %d characters", rs, chars)
	}
	if w.ResultTokens.P95 != tokens {
		t.Errorf("summary result_tokens p95 = %d, want ceil(%d/4) = %d", w.ResultTokens.P95, chars, tokens)
	}
	if sum.Warn != 1500 {
		t.Errorf("resultSizeWarnChars = %d, want 1500", sum.Warn)
	}

	metricsURL := g.adminURL + "/metrics"
	tool := map[string]string{"tool": "weather"}
	if got := scrapeValue(t, metricsURL, "turnstile_tool_result_chars_sum", tool); got != float64(chars) {
		t.Errorf("turnstile_tool_result_chars_sum = %v, want %d characters (not %d bytes)", got, chars, bytes)
	}
	if got := scrapeValue(t, metricsURL, "turnstile_tool_result_tokens_sum", tool); got != float64(tokens) {
		t.Errorf("turnstile_tool_result_tokens_sum = %v, want %d", got, tokens)
	}

	// The session-init estimate of the system prompt the model got: its
	// characters, a quarter of them rounded up (the prompt with today's
	// guides is 3842 characters, 4845 bytes).
	system := systemText(brain.Requests()[0])
	if !strings.HasPrefix(system, prompt) {
		t.Fatalf("the system instruction does not start with the configured prompt: %.40q", system)
	}
	want := (utf8.RuneCountInString(system) + 3) / 4
	if got := sum.Context.SystemPromptTokens; got != want {
		t.Errorf("context.systemPromptTokens = %d, want ceil(%d characters / 4) = %d (the prompt is %d bytes)",
			got, utf8.RuneCountInString(system), want, len(system))
	}
	if got := scrapeValue(t, metricsURL, "turnstile_session_init_system_tokens_estimate", map[string]string{"mode": "text"}); got != float64(want) {
		t.Errorf("turnstile_session_init_system_tokens_estimate{mode=text} = %v, want %d", got, want)
	}
}
