package main

// Voice in the documented metrics: what Gemini Live reports a turn cost,
// and the context budget from the configuration.

import (
	"testing"
)

// scrapeValue is the value of the series of name whose labels include
// want, on a /metrics page (-1 when there is none).
func scrapeValue(t *testing.T, url, name string, want map[string]string) float64 {
	t.Helper()
next:
	for _, smp := range scrapeSamples(t, url)[name] {
		for k, v := range want {
			if smp.labels[k] != v {
				continue next
			}
		}
		return smp.value
	}
	return -1
}

func TestVoiceTokensAndTheContextBudgetShowOnMetrics(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.ContextMaxTokens = 24000
	g := startGateway(t, cfg, nil) // the demo Live model reports usage as the real service does
	metricsURL := g.adminURL + "/metrics"
	if got := scrapeValue(t, metricsURL, "turnstile_session_context_budget_tokens", nil); got != 24000 {
		t.Fatalf("context budget gauge = %v at start, want TURNSTILE_CONTEXT_MAX_TOKENS (24000)", got)
	}
	voice := func(kind, modality string) float64 {
		return scrapeValue(t, metricsURL, "turnstile_model_tokens_total",
			map[string]string{"provider": "gemini", "mode": "voice", "kind": kind, "modality": modality, "channel": "browser"})
	}
	if in, out := voice("input", "text"), voice("output", "audio"); in != 0 || out != 0 {
		t.Fatalf("voice token series at start: input text %v, output audio %v; want both present at 0", in, out)
	}

	c := g.dial("", nil)
	c.start(map[string]any{"mode": "voice"})
	c.send(map[string]any{"type": "text", "text": "How long does shipping take?"})
	c.recvUntil("turn.done")
	waitFor(t, "the turn's usage on /metrics", func() bool { return voice("output", "audio") > 0 })
	if in := voice("input", "text"); in < float64(len("How long does shipping take?"))/4 {
		t.Fatalf("voice input text tokens = %v, want the typed question's", in)
	}
	text := scrapeValue(t, metricsURL, "turnstile_model_tokens_total",
		map[string]string{"provider": "gemini", "mode": "text", "kind": "output", "modality": "text", "channel": "browser"})
	if text != 0 {
		t.Fatalf("a voice turn counted %v text-mode tokens", text)
	}
}
