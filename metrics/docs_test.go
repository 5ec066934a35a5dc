package metrics

import (
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/loopdetect"
)

// docRows returns docs/operations.md's metric table rows by metric name
// (without the turnstile_ prefix); a row may name several metrics.
func docRows(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.SplitN(line, "|", 3)[1]
		for _, name := range strings.Split(first, ",") {
			name = strings.Trim(strings.TrimSpace(name), "`")
			rows[name] = append(rows[name], line)
		}
	}
	return rows
}

func channelLabels() []string {
	var out []string
	for _, ch := range Channels {
		out = append(out, ch.String())
	}
	return out
}

// Every metric the gateway registers has exactly one row in the operations
// guide, and the rows of the closed label sets an operator alerts on name
// every value.
func TestEveryMetricHasOneDocumentedRow(t *testing.T) {
	reg := prometheus.NewRegistry()
	New(reg, Build{})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	rows := docRows(t)
	for _, f := range families {
		name, ours := strings.CutPrefix(f.GetName(), "turnstile_")
		if !ours {
			continue // the Go and process collectors, documented by Prometheus
		}
		if got := len(rows[name]); got != 1 {
			t.Errorf("docs/operations.md has %d rows for %s, want 1", got, name)
		}
	}
	closed := map[string]struct {
		label  string
		values []string
	}{
		"browser_disconnects_total":         {"reason", DisconnectReasons()},
		"refusals_total":                    {"reason", labelValues(refusalReasons)},
		"sessions_refused_total":            {"reason", SessionRefusalReasons},
		"redis_duration_seconds":            {"op", labelValues(RedisOps)},
		"model_requests_total":              {"outcome", labelValues(ModelOutcomes)},
		"sessions_started_total":            {"kind", labelValues(SessionStartKinds)},
		"loop_detections_total":             {"rule", labelValues(loopdetect.Rules)},
		"intents_applied_total":             {"type", labelValues(intents.Types)},
		"confirmations_total":               {"outcome", labelValues(ConfirmationOutcomes)},
		"voice_audio_dropped_seconds_total": {"reason", labelValues(VoiceDropReasons)},
		"gate_refusals_total":               {"gate", labelValues(Gates)},
		"telephony_events_total":            {"event", labelValues(TelephonyEventNames)},
		"channel_sessions_active":           {"channel", channelLabels()},
		"sessions_active":                   {"channel", channelLabels()},
		"turns_total":                       {"channel", channelLabels()},
		"jwks_refresh_failures_total":       {"reason", JWKSRefreshFailureReasons},
		"tools_reloads_total":               {"outcome", labelValues(ToolsReloadOutcomes)},
	}
	for name, set := range closed {
		if len(rows[name]) != 1 {
			continue
		}
		for _, v := range set.values {
			if !strings.Contains(rows[name][0], "`"+v+"`") {
				t.Errorf("docs/operations.md: the %s row does not name %s %q", name, set.label, v)
			}
		}
	}
}

// labelValues is a typed closed set's label values.
func labelValues[S ~string](set []S) []string {
	out := make([]string, len(set))
	for i, v := range set {
		out[i] = string(v)
	}
	return out
}
