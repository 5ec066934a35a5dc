package metrics

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/loopdetect"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/transport"
)

func TestEveryClosedLabelSetStartsAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, Build{})
	modes, reasons, chans := len(protocol.Modes), len(protocol.TurnEndReasons), len(Channels)
	want := map[string]int{
		"turnstile_sessions_active":                     modes * chans,
		"turnstile_turns_total":                         modes * reasons * chans,
		"turnstile_turn_duration_seconds":               modes,
		"turnstile_tool_calls_per_turn":                 modes,
		"turnstile_session_init_tokens_estimate":        modes,
		"turnstile_session_init_system_tokens_estimate": modes,
		"turnstile_session_init_tool_tokens_estimate":   modes,
		"turnstile_gate_refusals_total":                 modes * len(Gates),
		"turnstile_sessions_started_total":              len(SessionStartKinds) * chans,
		"turnstile_sessions_refused_total":              len(SessionRefusalReasons) * chans,
		"turnstile_model_requests_total":                len(ModelRequestKinds) * len(ModelOutcomes),
		"turnstile_model_first_chunk_seconds":           len(ModelRequestKinds),
		"turnstile_model_tokens_total":                  8 * chans,
		"turnstile_browser_messages_total":              len(BrowserMessageTypes()),
		"turnstile_browser_disconnects_total":           len(protocol.Disconnects),
		"turnstile_redis_duration_seconds":              len(RedisOps),
		"turnstile_redis_errors_total":                  len(RedisOps),
		"turnstile_loop_detections_total":               len(loopdetect.Rules),
		"turnstile_intents_applied_total":               len(intents.Types),
		"turnstile_confirmations_total":                 len(ConfirmationOutcomes),
		"turnstile_voice_audio_dropped_seconds_total":   len(VoiceDropReasons) * chans,
		"turnstile_upstream_events_total":               len(upstreamEvents),
		"turnstile_tool_calls_total":                    len(ToolOutcomes()) * chans, // the "unknown" tool
		"turnstile_tool_duration_seconds":               1,
		"turnstile_tool_result_chars":                   1,
		"turnstile_tool_result_tokens":                  1,
		"turnstile_ready":                               1,
		"turnstile_session_context_tokens":              1,
		"turnstile_session_context_budget_tokens":       1,
		"turnstile_session_peak_context_tokens":         1,
		"turnstile_tool_calls_per_session":              1,
		"turnstile_audio_out_frames_total":              len(AudioPaths) * chans,
	}
	for name, n := range want {
		if got, err := testutil.GatherAndCount(reg, name); err != nil || got != n {
			t.Errorf("%s: %d series at start (%v), want %d", name, got, err, n)
		}
	}
	m.InitTools([]string{"kb_search", "kb_get"})
	if got, _ := testutil.GatherAndCount(reg, "turnstile_tool_calls_total"); got != 3*len(ToolOutcomes())*chans {
		t.Errorf("tool calls: %d series after InitTools of two tools, want %d", got, 3*len(ToolOutcomes())*chans)
	}
	if got, _ := testutil.GatherAndCount(reg, "turnstile_tool_soft_latency_exceeded_total"); got != 3*modes {
		t.Errorf("soft latency: %d series, want %d", got, 3*modes)
	}
	// Every series starts at zero.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "turnstile_") || mf.GetName() == "turnstile_build_info" {
			continue
		}
		for _, s := range mf.GetMetric() {
			if v := s.GetCounter().GetValue() + s.GetGauge().GetValue() + float64(s.GetHistogram().GetSampleCount()); v != 0 {
				t.Errorf("%s %v starts at %v", mf.GetName(), s.GetLabel(), v)
			}
		}
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}
}

// repoRoot is the module root, two levels up from this package.
const repoRoot = ".."

// parsePackage parses the non-test Go files of a package folder.
func parsePackage(t *testing.T, dir string) []*ast.File {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// stringConstsOfType returns the values of the string constants declared
// with the named type in a package folder.
func stringConstsOfType(t *testing.T, dir, typeName string) []string {
	t.Helper()
	var out []string
	for _, f := range parsePackage(t, dir) {
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok || vs.Type == nil {
				return true
			}
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != typeName {
				return true
			}
			for _, v := range vs.Values {
				if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, _ := strconv.Unquote(lit.Value)
					out = append(out, s)
				}
			}
			return true
		})
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// Every closed set a metric is labelled with lists each constant of its
// type, so that a new intent, rule, mode or error type cannot be left
// uninitialised; the label set copied from a package above this one
// (tools.ErrorType) matches its source.
func TestLabelSetsMatchTheirSources(t *testing.T) {
	for _, c := range []struct {
		dir, typ string
		ours     []string
	}{
		{"intents", "Type", labelValues(intents.Types)},
		{"loopdetect", "Rule", labelValues(loopdetect.Rules)},
		{"tools", "ErrorType", labelValues(tools.ErrorTypes)},
		{"protocol", "Mode", labelValues(protocol.Modes)},
		{"protocol", "TurnEnd", labelValues(protocol.TurnEndReasons)},
		{"transport", "Provider", labelValues(transport.Providers)},
		{"metrics", "Gate", labelValues(Gates)},
		{"metrics", "UntrustedAction", labelValues(UntrustedActions)},
		{"metrics", "SessionStart", labelValues(SessionStartKinds)},
		{"metrics", "RelayDirection", labelValues(RelayDirections)},
		{"metrics", "LiveEvent", labelValues(LiveEvents)},
		{"metrics", "VoiceDrop", labelValues(VoiceDropReasons)},
		{"metrics", "TelephonyEvent", labelValues(TelephonyEventNames)},
		{"metrics", "ModelOutcome", labelValues(ModelOutcomes)},
		{"metrics", "ConfirmationOutcome", labelValues(ConfirmationOutcomes)},
		{"metrics", "RedisOp", labelValues(RedisOps)},
		{"metrics", "RefusalReason", labelValues(refusalReasons)},
	} {
		src := stringConstsOfType(t, filepath.Join(repoRoot, c.dir), c.typ)
		if len(src) == 0 || !sameSet(src, c.ours) {
			t.Errorf("%s.%s values %v, metrics initialises %v", c.dir, c.typ, src, c.ours)
		}
	}

	// The store reports each call with one of the RedisOp constants
	// (s.call(ctx, metrics.RedisX, …)), never a literal the type would
	// take without a constant of the set.
	for _, f := range parsePackage(t, filepath.Join(repoRoot, "store")) {
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok && len(call.Args) >= 2 {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "call" {
					var pkg *ast.Ident
					if op, ok := call.Args[1].(*ast.SelectorExpr); ok {
						pkg, _ = op.X.(*ast.Ident)
					}
					if pkg == nil || pkg.Name != "metrics" {
						t.Errorf("a store call passes %T as its op, want a metrics.RedisOp constant", call.Args[1])
					}
				}
			}
			return true
		})
	}

	// The model outcomes are declared once, as metrics.ModelOutcome: no
	// copy to check.
}

// Label values are picked in package metrics only, and every one written
// there as a literal (m.X.WithLabelValues("lit", …)) is one New creates at
// zero.
func TestEveryLiteralLabelValueIsInitialised(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, Build{})
	m.InitTools(nil)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string][]map[string]string{} // metric name → its series' labels
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			byName[mf.GetName()] = append(byName[mf.GetName()], labels)
		}
	}
	// Each Metrics field with a closed label set: its metric and its labels
	// in WithLabelValues order. Label positions that take registry names or
	// open values (tools, MCP servers, close codes) are left out ("").
	type vec struct {
		metric string
		labels []string
	}
	fields := map[string]vec{
		"SessionsActive":    {"turnstile_sessions_active", []string{"mode"}},
		"SessionsStarted":   {"turnstile_sessions_started_total", []string{"kind"}},
		"SessionsRefused":   {"turnstile_sessions_refused_total", []string{"reason"}},
		"Turns":             {"turnstile_turns_total", []string{"mode", "reason"}},
		"TurnDuration":      {"turnstile_turn_duration_seconds", []string{"mode"}},
		"ModelRequests":     {"turnstile_model_requests_total", []string{"kind", "outcome"}},
		"ModelFirstToken":   {"turnstile_model_first_chunk_seconds", []string{"kind"}},
		"BrowserMessages":   {"turnstile_browser_messages_total", []string{"type"}},
		"BrowserDisconnect": {"turnstile_browser_disconnects_total", []string{"reason"}},
		"GateRefusals":      {"turnstile_gate_refusals_total", []string{"gate", "mode"}},
		"LoopDetections":    {"turnstile_loop_detections_total", []string{"rule"}},
		"IntentsApplied":    {"turnstile_intents_applied_total", []string{"type"}},
		"Confirmations":     {"turnstile_confirmations_total", []string{"outcome"}},
		"VoiceAudioDropped": {"turnstile_voice_audio_dropped_seconds_total", []string{"reason"}},
		"ToolCallsPerTurn":  {"turnstile_tool_calls_per_turn", []string{"mode"}},
		"UpstreamEvents":    {"turnstile_upstream_events_total", []string{"kind", "event", ""}},
	}
	checked, calls := 0, 0
	err = filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != repoRoot {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "WithLabelValues" {
				return true
			}
			// Label values come from metrics' typed methods: nothing
			// outside this package picks them.
			if filepath.Dir(path) != filepath.Join(repoRoot, "metrics") {
				t.Errorf("%s: WithLabelValues outside package metrics: add a typed method to metrics", path)
			}
			calls++
			recv, ok := sel.X.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			v, known := fields[recv.Sel.Name]
			if !known {
				return true
			}
			for i, a := range call.Args {
				lit, ok := a.(*ast.BasicLit)
				if !ok || i >= len(v.labels) || v.labels[i] == "" {
					continue
				}
				val, _ := strconv.Unquote(lit.Value)
				checked++
				found := false
				for _, labels := range byName[v.metric] {
					found = found || labels[v.labels[i]] == val
				}
				if !found {
					t.Errorf("%s: %s{%s=%q} is not created at zero", path, v.metric, v.labels[i], val)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls < 20 || checked < 2 {
		t.Errorf("only %d WithLabelValues calls and %d literal label values found: the scan is broken", calls, checked)
	}
}
