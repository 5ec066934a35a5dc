package gateway_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// deployDir is the stack's folder, from this package.
var deployDir = filepath.Join("..", "deploy")

// promExpr is one PromQL expression of the stack's files and where it is.
type promExpr struct{ where, expr string }

// dashboardExprs are the Grafana dashboard's panel queries, and the metric
// and label of its label_values() variables (as the selector metric{label}).
func dashboardExprs(t *testing.T) []promExpr {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir, "grafana", "turnstile.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query struct {
					Query string `json:"query"`
				} `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("deploy/grafana/turnstile.json: %v", err)
	}
	var out []promExpr
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			out = append(out, promExpr{"dashboard panel " + p.Title, tg.Expr})
		}
	}
	labelValues := regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)
	for _, v := range dash.Templating.List {
		m := labelValues.FindStringSubmatch(v.Query.Query)
		if m == nil {
			t.Errorf("dashboard variable %s: query %q is not label_values(metric, label)", v.Name, v.Query.Query)
			continue
		}
		out = append(out, promExpr{"dashboard variable " + v.Name, m[1] + `{` + m[2] + `!=""}`})
	}
	return out
}

// alertExprs are the alerting rules' expressions.
func alertExprs(t *testing.T) []promExpr {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir, "prometheus", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("deploy/prometheus/alerts.yaml: %v", err)
	}
	var out []promExpr
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("alert %q: needs alert, expr, labels.severity and annotations.summary", r.Alert)
			}
			out = append(out, promExpr{"alert " + r.Alert, r.Expr})
		}
	}
	return out
}

// exposition is what one scrape of /metrics shows: each series name (a
// histogram's _bucket, _sum and _count included) with the label sets of
// its series.
type exposition map[string][]map[string]string

func scrapeExposition(t *testing.T, url string) exposition {
	t.Helper()
	exp := exposition{}
	for name, samples := range scrapeSamples(t, url) {
		for _, smp := range samples {
			exp[name] = append(exp[name], smp.labels)
		}
	}
	return exp
}

// targetLabels are added by Prometheus to every scraped series; up is a
// series Prometheus makes itself.
var targetLabels = map[string]bool{"instance": true, "job": true}

func (e exposition) hasLabel(metric, label string) bool {
	if metric == "up" {
		return targetLabels[label]
	}
	if targetLabels[label] {
		return true
	}
	for _, ls := range e[metric] {
		if _, ok := ls[label]; ok {
			return true
		}
	}
	return false
}

// checkPromQL reports each metric or label expr uses that exp lacks.
func checkPromQL(exp exposition, expr string) []string {
	n, err := parsePromQL(expr)
	if err != nil {
		return []string{"does not parse: " + err.Error()}
	}
	var problems []string
	sels := pqSelectors(n)
	if len(sels) == 0 {
		problems = append(problems, "names no metric")
	}
	for _, s := range sels {
		if _, ok := exp[s.name]; !ok && s.name != "up" {
			problems = append(problems, "metric "+s.name+" is not exposed")
			continue
		}
		for _, m := range s.matchers {
			if !exp.hasLabel(s.name, m.label) {
				problems = append(problems, s.name+" has no label "+m.label)
				continue
			}
			// An exact value (not a Grafana variable) must be one the
			// gateway exposes, so that a typo cannot match nothing forever.
			if m.op == "=" && m.value != "" && !strings.Contains(m.value, "$") && !targetLabels[m.label] &&
				!slices.ContainsFunc(exp[s.name], func(ls map[string]string) bool { return ls[m.label] == m.value }) {
				problems = append(problems, s.name+" has no series with "+m.label+"=\""+m.value+"\"")
			}
		}
	}
	var walk func(pqNode)
	need := func(ctx string, labels []string, sels []pqSelector) {
		for _, l := range labels {
			for _, s := range sels {
				if !exp.hasLabel(s.name, l) {
					problems = append(problems, ctx+": "+s.name+" has no label "+l)
				}
			}
		}
	}
	walk = func(n pqNode) {
		switch n := n.(type) {
		case pqAgg:
			need(n.op+" by/without", n.grouping, pqSelectors(n.expr))
			walk(n.expr)
		case pqBinary:
			if n.on {
				need("on", n.matching, pqSelectors(n.lhs))
				need("on", n.matching, pqSelectors(n.rhs))
			}
			switch n.group {
			case "group_left":
				need("group_left", n.include, pqSelectors(n.rhs))
			case "group_right":
				need("group_right", n.include, pqSelectors(n.lhs))
			}
			walk(n.lhs)
			walk(n.rhs)
		case pqCall:
			for _, a := range n.args {
				walk(a)
			}
		case pqRange:
			walk(n.expr)
		case pqUnary:
			walk(n.expr)
		}
	}
	walk(n)
	return problems
}

// TestDashboardAndAlertsUseOnlyWhatAFreshGatewayExposes takes every PromQL
// expression of deploy/grafana/turnstile.json and
// deploy/prometheus/alerts.yaml and checks that each metric it names, and
// each label it matches, groups or joins on, is on the /metrics of a gateway
// that has just started and served nothing: a dashboard panel or an alert
// that would see no data before the first event fails here.
func TestDashboardAndAlertsUseOnlyWhatAFreshGatewayExposes(t *testing.T) {
	g := startGateway(t, defaultTestConfig(t), nil)
	exp := scrapeExposition(t, g.adminURL+"/metrics")
	dash, alerts := dashboardExprs(t), alertExprs(t)
	if len(dash) < 30 || len(alerts) < 8 {
		t.Fatalf("%d dashboard and %d alert expressions: the files were not read", len(dash), len(alerts))
	}
	for _, e := range append(dash, alerts...) {
		for _, p := range checkPromQL(exp, e.expr) {
			t.Errorf("%s: %s\n    %s", e.where, p, e.expr)
		}
	}
	// The panels and alerts are all there.
	var all strings.Builder
	for _, e := range append(dash, alerts...) {
		all.WriteString(e.expr + "\n")
	}
	for _, m := range []string{"turnstile_sessions_active", "turnstile_turns_total", "turnstile_turn_duration_seconds_bucket",
		"turnstile_tool_calls_total", "turnstile_tool_duration_seconds_bucket", "turnstile_tool_result_chars_bucket",
		"turnstile_tool_result_tokens_bucket", "turnstile_gate_refusals_total", "turnstile_loop_detections_total",
		"turnstile_confirmations_total", "turnstile_upstream_events_total", "turnstile_model_requests_total",
		"turnstile_redis_duration_seconds_bucket", "turnstile_redis_errors_total", "turnstile_browser_disconnects_total",
		"process_cpu_seconds_total", "process_resident_memory_bytes", "go_goroutines", "turnstile_ready",
		"turnstile_sessions_refused_total", "turnstile_session_context_tokens", "turnstile_session_context_budget_tokens",
		"turnstile_relay_added_seconds_bucket", "go_sched_latencies_seconds_bucket"} {
		if !strings.Contains(all.String(), m) {
			t.Errorf("no panel or alert uses %s", m)
		}
	}
}

// The check catches what it is there for.
func TestPromQLCheckFindsMissingMetricsAndLabels(t *testing.T) {
	exp := exposition{
		"a_total":  {{"op": "x"}, {"op": "y"}},
		"b_bucket": {{"tool": "t", "le": "1"}},
	}
	for expr, want := range map[string]string{
		`rate(a_total[5m])`: "",
		`sum by (op) (rate(a_total{op="x", instance=~"$i"}[5m]))`:         "",
		`histogram_quantile(0.9, sum by (tool, le) (rate(b_bucket[5m])))`: "",
		`up{job="turnstile"} == 0`:                                        "",
		`rate(c_total[5m])`:                                               "metric c_total is not exposed",
		`a_total{mode="text"}`:                                            "a_total has no label mode",
		`a_total{op="z"}`:                                                 `a_total has no series with op="z"`,
		`sum by (tool) (a_total)`:                                         "sum by/without: a_total has no label tool",
		`a_total / on(tool) b_bucket`:                                     "on: a_total has no label tool",
		`a_total * on(op) group_left(tool) a_total`:                       "group_left: a_total has no label tool",
		`label_replace(a_total, "x", "$1", "op", "(.*)")`:                 "does not parse",
	} {
		got := strings.Join(checkPromQL(exp, expr), "; ")
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%s: problems %q, want %q", expr, got, want)
		}
	}
}
