package gateway_test

// Every shipped alert can fire: each series its rule reads moves when the
// thing it watches happens (or, for a gauge set from the configuration,
// holds that configuration), on a real gateway driven through each event.
// A series that only exists at 0 fails here.

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// sample is one series of a scrape, histograms spelt out as Prometheus
// stores them (_bucket with le, _sum, _count).
type sample struct {
	labels map[string]string
	value  float64
}

func scrapeSamples(t *testing.T, url string) map[string][]sample {
	t.Helper()
	code, body := get(t, url)
	if code != 200 {
		t.Fatalf("GET %s: %d", url, code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]sample{}
	for name, mf := range families {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				out[name+"_count"] = append(out[name+"_count"], sample{labels, float64(h.GetSampleCount())})
				out[name+"_sum"] = append(out[name+"_sum"], sample{labels, h.GetSampleSum()})
				for _, b := range h.GetBucket() {
					bl := map[string]string{"le": strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)}
					for k, v := range labels {
						bl[k] = v
					}
					out[name+"_bucket"] = append(out[name+"_bucket"], sample{bl, float64(b.GetCumulativeCount())})
				}
			case m.GetSummary() != nil:
				sm := m.GetSummary()
				out[name] = append(out[name], sample{labels, float64(sm.GetSampleCount())})
				out[name+"_count"] = append(out[name+"_count"], sample{labels, float64(sm.GetSampleCount())})
				out[name+"_sum"] = append(out[name+"_sum"], sample{labels, sm.GetSampleSum()})
			case m.GetCounter() != nil:
				out[name] = append(out[name], sample{labels, m.GetCounter().GetValue()})
			case m.GetGauge() != nil:
				out[name] = append(out[name], sample{labels, m.GetGauge().GetValue()})
			}
		}
	}
	return out
}

// selected is the sum of the series s selects in a scrape.
func selected(t *testing.T, scrape map[string][]sample, s pqSelector) float64 {
	t.Helper()
	var sum float64
next:
	for _, smp := range scrape[s.name] {
		for _, m := range s.matchers {
			v := smp.labels[m.label]
			var ok bool
			switch m.op {
			case "=":
				ok = v == m.value
			case "!=":
				ok = v != m.value
			case "=~", "!~":
				re, err := regexp.Compile("^(?:" + m.value + ")$")
				if err != nil {
					t.Fatalf("%s: matcher %s%s%q: %v", s.name, m.label, m.op, m.value, err)
				}
				ok = re.MatchString(v) == (m.op == "=~")
			default:
				t.Fatalf("%s: unknown matcher op %q", s.name, m.op)
			}
			if !ok {
				continue next
			}
		}
		sum += smp.value
	}
	return sum
}

func TestEveryShippedAlertCanFire(t *testing.T) {
	const budget = 1000 // the lowest TURNSTILE_CONTEXT_MAX_TOKENS: the system prompt and tools nearly fill it
	rdb := redistest.StartServer(t)
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + rdb.Addr)
	cfg.ContextMaxTokens = budget
	script := fakegemini.NewScript(
		fakegemini.Fixed(fakegemini.CallReply(fakegemini.Call{Name: "kb_get", Args: map[string]any{"id": "shipping"}})),
		fakegemini.Fixed(fakegemini.TextReply("Orders ship within two days.", 2)),
		fakegemini.Fixed(fakegemini.ErrorReply(http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", "quota")),
	)
	g := startGatewayWith(t, cfg, brains{text: script}) // the demo Live model
	metricsURL := g.adminURL + "/metrics"
	var scrapes []map[string][]sample
	snapshot := func() map[string][]sample {
		s := scrapeSamples(t, metricsURL)
		scrapes = append(scrapes, s)
		return s
	}
	snapshot() // fresh

	// The node answers /readyz (turnstile_ready goes to 1).
	if code, _ := get(t, g.url+"/readyz"); code != 200 {
		t.Fatalf("/readyz: %d", code)
	}
	snapshot()

	// A session calls a tool (result bytes) and holds a context near the
	// budget while it is live.
	c := g.dial("", nil)
	c.start(nil)
	if rs := ofType(c.ask("How long does shipping take?"), "tool.result"); len(rs) != 1 || rs[0]["ok"] != true {
		t.Fatalf("tool result: %v", rs)
	}
	live := snapshot()
	ctx := selected(t, live, pqSelector{name: "turnstile_session_context_tokens"})
	if ctx <= 0.9*budget {
		t.Fatalf("context %v tokens with a %d budget: TurnstileSessionContextNearBudget would not fire", ctx, budget)
	}

	// The model refuses a request (rate limited).
	if evs := c.ask("And returns?"); len(ofType(evs, "error")) == 0 {
		t.Fatalf("no error for a refused model request: %v", evs)
	}
	snapshot()

	// Gemini Live cannot be reached: moving to voice fails to connect.
	if err := g.gw.fake.Close(); err != nil {
		t.Fatal(err)
	}
	c.send(map[string]any{"type": "voice.start"})
	testwait.For(t, "a failed Live connect on /metrics", func() bool {
		return selected(t, scrapeSamples(t, metricsURL), pqSelector{name: "turnstile_upstream_events_total",
			matchers: []pqMatcher{{"kind", "=", "live"}, {"event", "=", "error"}}}) > 0
	})
	snapshot()

	// Redis goes away: a new session is refused, Redis calls fail and the
	// node is not ready.
	rdb.Stop()
	if fresh, err := g.tryDial("", nil); err == nil {
		fresh.send(map[string]any{"type": "session.start"})
		_, _ = fresh.read()
	}
	if code, _ := get(t, g.url+"/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz without Redis: %d", code)
	}
	snapshot()

	configured := map[string]float64{"turnstile_session_context_budget_tokens": budget}
	alerts := alertExprs(t)
	if len(alerts) < 8 {
		t.Fatalf("%d alerts: the file was not read", len(alerts))
	}
	for _, a := range alerts {
		n, err := parsePromQL(a.expr)
		if err != nil {
			t.Fatalf("%s: %v", a.where, err)
		}
		for _, s := range pqSelectors(n) {
			if s.name == "up" { // Prometheus's own series for a target it cannot scrape
				continue
			}
			seen := map[float64]bool{}
			for _, sc := range scrapes {
				seen[selected(t, sc, s)] = true
			}
			if want, ok := configured[s.name]; ok {
				if len(seen) != 1 || !seen[want] {
					t.Errorf("%s: %s took %v, want the configured %v throughout", a.where, s.name, seen, want)
				}
				continue
			}
			if len(seen) < 2 {
				t.Errorf("%s: %s never moved (%v) while the gateway went through what the alert watches", a.where, s.name, seen)
			}
		}
	}
}

// The rules file points operators to a section of docs/operations.md: it
// exists and says what to do for every alert.
func TestAlertsPointToASectionThatCoversEachAlert(t *testing.T) {
	rules, err := os.ReadFile(filepath.Join(deployDir, "prometheus", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`docs/operations\.md, "([^"]+)"`).FindSubmatch(rules)
	if m == nil {
		t.Fatal("alerts.yaml does not say which section of docs/operations.md explains its alerts")
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## "+string(m[1])+"\n")
	if !ok {
		t.Fatalf("docs/operations.md has no section %q", m[1])
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for _, a := range alertExprs(t) {
		name := strings.TrimPrefix(a.where, "alert ")
		if !strings.Contains(section, "| `"+name+"` |") {
			t.Errorf("section %q has no row for %s", m[1], name)
		}
	}
}
