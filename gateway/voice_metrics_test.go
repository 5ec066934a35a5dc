package gateway_test

// Voice in the documented metrics: what Gemini Live reports a turn cost,
// and the context budget from the configuration.

import (
	"slices"
	"testing"

	"github.com/turnstile-gw/turnstile/internal/testwait"
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
	testwait.For(t, "the turn's usage on /metrics", func() bool { return voice("output", "audio") > 0 })
	if in := voice("input", "text"); in < float64(len("How long does shipping take?"))/4 {
		t.Fatalf("voice input text tokens = %v, want the typed question's", in)
	}
	text := scrapeValue(t, metricsURL, "turnstile_model_tokens_total",
		map[string]string{"provider": "gemini", "mode": "text", "kind": "output", "modality": "text", "channel": "browser"})
	if text != 0 {
		t.Fatalf("a voice turn counted %v text-mode tokens", text)
	}
}

// A voice turn is timed as a text turn is: it has its observation in
// turnstile_turn_duration_seconds{mode="voice"}, taken before its turn.done
// goes out, and the dashboard's "Turn latency" panel plots that histogram
// per mode, so the panel's voice lines show real data.
func TestVoiceTurnDurationIsObservedForTheDashboard(t *testing.T) {
	g, script := startVoiceGateway(t, defaultTestConfig(t), nil)
	metricsURL := g.adminURL + "/metrics"
	c, _, u := startInVoice(t, g, script)
	must(t, u.SendAudio(pcm24Tone(440, 0, 2400)))
	must(t, u.SendTurnComplete(nil))
	c.recvUntil("turn.done")

	scrape := scrapeSamples(t, metricsURL)
	inf := func(mode string) float64 {
		return selected(t, scrape, pqSelector{name: "turnstile_turn_duration_seconds_bucket",
			matchers: []pqMatcher{{"mode", "=", mode}, {"le", "=", "+Inf"}}})
	}
	if voice, text := inf("voice"), inf("text"); voice != 1 || text != 0 {
		t.Fatalf("turn_duration_seconds observations after one voice turn: voice %v, text %v; want 1 and 0", voice, text)
	}
	if n := selected(t, scrape, pqSelector{name: "turnstile_turns_total",
		matchers: []pqMatcher{{"mode", "=", "voice"}}}); n != 1 {
		t.Fatalf("turns_total{mode=voice} = %v, want the one turn", n)
	}

	// The panel: a quantile of that histogram's buckets summed by mode
	// (and le), so voice and text are lines of their own.
	var panel []string
	for _, e := range dashboardExprs(t) {
		if e.where == "dashboard panel Turn latency" {
			panel = append(panel, e.expr)
		}
	}
	if len(panel) == 0 {
		t.Fatal(`the dashboard has no "Turn latency" panel`)
	}
	for _, expr := range panel {
		n, err := parsePromQL(expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		call, ok := n.(pqCall)
		if !ok || call.fn != "histogram_quantile" || len(call.args) != 2 {
			t.Fatalf("%s: not histogram_quantile(φ, …)", expr)
		}
		agg, ok := call.args[1].(pqAgg)
		if !ok || agg.op != "sum" || agg.without || !slices.Contains(agg.grouping, "mode") || !slices.Contains(agg.grouping, "le") {
			t.Fatalf("%s: the buckets are not summed by mode and le", expr)
		}
		for _, s := range pqSelectors(agg.expr) {
			if s.name != "turnstile_turn_duration_seconds_bucket" {
				t.Fatalf("%s: plots %s, not the turn duration buckets", expr, s.name)
			}
		}
	}
}
