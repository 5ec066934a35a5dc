package metrics

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/protocol"
)

func TestMetricNamesPassLint(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg, Build{Version: "test", Commit: "abc"})
	// Touch every vector so that the linter sees a sample of each.
	m.SessionsActive.WithLabelValues("text", "browser").Inc()
	m.SessionsStarted.WithLabelValues("new", "browser").Inc()
	m.Turns.WithLabelValues("text", "end_turn", "browser").Inc()
	m.TurnDuration.WithLabelValues("text").Observe(1)
	m.ToolCalls.WithLabelValues("kb_search", "ok", "browser").Inc()
	m.ToolDuration.WithLabelValues("kb_search").Observe(0.01)
	m.ToolResultChars.WithLabelValues("kb_search").Observe(100)
	m.ModelRequests.WithLabelValues("text", "ok").Inc()
	m.ModelFirstToken.WithLabelValues("text").Observe(0.1)
	m.BrowserMessages.WithLabelValues("text").Inc()
	m.BrowserDisconnect.WithLabelValues("client_closed").Inc()
	m.InitTokens.WithLabelValues("text").Set(100)
	m.ObserveRedis("append", time.Millisecond, errors.New("down"))
	m.GateRefusals.WithLabelValues("retrieval", "voice").Inc()
	m.LoopDetections.WithLabelValues("repeated_call").Inc()
	m.IntentsApplied.WithLabelValues("navigate").Inc()
	m.Confirmations.WithLabelValues("requested").Inc()
	m.SoftLatencyExceeded.WithLabelValues("kb_search", "voice").Inc()
	m.ToolResultTokens.WithLabelValues("kb_search").Observe(25)
	m.ToolCallsPerTurn.WithLabelValues("text").Observe(2)
	m.UpstreamEvents.WithLabelValues("live", "close", "1011").Inc()
	m.ObserveToolCall("kb_get", "ok", ChannelBrowser, 3*time.Millisecond, 400)
	m.SetInitTokens("voice", 900)

	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}
	for _, name := range []string{
		"turnstile_gate_refusals_total", "turnstile_loop_detections_total",
		"turnstile_intents_applied_total", "turnstile_confirmations_total",
		"turnstile_tool_soft_latency_exceeded_total", "turnstile_tool_result_tokens",
		"turnstile_tool_calls_per_turn", "turnstile_upstream_events_total", "turnstile_model_tokens_total",
	} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n == 0 {
			t.Errorf("%s: %d series, %v; want some", name, n, err)
		}
	}
}

// The runtime's figures an operator sizing a node reads beside the memory
// statistics are exported.
func TestSchedulerLatencyAndStackStartExported(t *testing.T) {
	reg := prometheus.NewRegistry()
	New(reg, Build{Version: "test"})
	for _, name := range []string{"go_sched_latencies_seconds", "go_gc_stack_starting_size_bytes", "go_gc_cycles_forced_gc_cycles_total"} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 1 {
			t.Errorf("%s: %d series, %v", name, n, err)
		}
	}
}

func TestBuildInfoExported(t *testing.T) {
	reg := prometheus.NewRegistry()
	New(reg, Build{Version: "1.2.3", Commit: "deadbeef"})
	n, err := testutil.GatherAndCount(reg, "turnstile_build_info")
	if err != nil || n != 1 {
		t.Fatalf("turnstile_build_info count = %d, %v", n, err)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "turnstile_build_info" {
			continue
		}
		var labels []string
		for _, l := range mf.GetMetric()[0].GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		got := strings.Join(labels, ",")
		if !strings.Contains(got, "version=1.2.3") || !strings.Contains(got, "commit=deadbeef") {
			t.Fatalf("build info labels = %s", got)
		}
	}
}

func TestRedisErrorsCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, Build{})
	m.ObserveRedis("append", time.Millisecond, nil)
	m.ObserveRedis("append", time.Millisecond, errors.New("x"))
	if got := testutil.ToFloat64(m.RedisErrors.WithLabelValues("append")); got != 1 {
		t.Fatalf("redis errors = %v, want 1", got)
	}
}

func TestModelTokensStartAtZeroForEachProviderAndKind(t *testing.T) {
	reg := prometheus.NewRegistry()
	New(reg, Build{})
	if n, err := testutil.GatherAndCount(reg, "turnstile_model_tokens_total"); err != nil || n != 8*len(Channels) {
		t.Fatalf("turnstile_model_tokens_total has %d series (%v), want text (gemini and openai) and voice "+
			"(gemini text and audio) × input and output × channel", n, err)
	}
}

func TestModelTokensAddUpPerProviderWithABoundedLabel(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, Build{})
	m.AddModelTokens("openai", ChannelBrowser, 120, 30)
	m.AddModelTokens("openai", ChannelBrowser, 80, 0)
	m.AddModelTokens("gemini", ChannelBrowser, 10, 5)
	m.AddModelTokens("llama-from-a-header", ChannelBrowser, 7, 3)
	m.AddModelTokens("gemini", ChannelBrowser, -4, -1)
	for _, c := range []struct {
		provider, kind string
		want           float64
	}{
		{"openai", "input", 200}, {"openai", "output", 30},
		{"gemini", "input", 10}, {"gemini", "output", 5},
		{"other", "input", 7}, {"other", "output", 3},
	} {
		if got := testutil.ToFloat64(m.ModelTokens.WithLabelValues(c.provider, "text", c.kind, "text", "browser")); got != c.want {
			t.Errorf("tokens{%s,%s} = %v, want %v", c.provider, c.kind, got, c.want)
		}
	}
	if n, _ := testutil.GatherAndCount(reg, "turnstile_model_tokens_total"); n != 8*len(Channels)+2 {
		t.Errorf("%d series, want %d: an unknown provider must not add a label value of its own", n, 8*len(Channels)+2)
	}
}

func TestVoiceTokensCountByModalityAndTheRestAsUnspecified(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, Build{})
	m.AddVoiceTokens(ChannelTwilio, "input", 554, map[string]int{"text": 553, "audio": 1})
	m.AddVoiceTokens(ChannelTwilio, "output", 25, map[string]int{"audio": 19}) // 6 thinking tokens without a split
	m.AddVoiceTokens(ChannelTwilio, "input", 10, nil)
	m.AddVoiceTokens(ChannelTwilio, "output", 4, map[string]int{"hologram": 4})
	m.AddVoiceTokens(ChannelTwilio, "sideways", 99, nil)
	for _, c := range []struct {
		kind, modality string
		want           float64
	}{
		{"input", "text", 553}, {"input", "audio", 1}, {"input", "unspecified", 10},
		{"output", "audio", 19}, {"output", "unspecified", 10}, {"output", "text", 0},
	} {
		if got := testutil.ToFloat64(m.ModelTokens.WithLabelValues("gemini", "voice", c.kind, c.modality, "twilio")); got != c.want {
			t.Errorf("voice tokens{%s,%s} = %v, want %v", c.kind, c.modality, got, c.want)
		}
	}
	if got := testutil.ToFloat64(m.ModelTokens.WithLabelValues("gemini", "text", "input", "text", "browser")); got != 0 {
		t.Errorf("voice tokens counted as text: %v", got)
	}
}

// turnstile_channel_sessions_active is deprecated because it is
// sum without (mode) (turnstile_sessions_active): the replacement a
// dashboard moves to gives the same value through a session's whole life
// (live in text, into voice and back, ended in either mode).
func TestDeprecatedChannelSessionsActiveIsSessionsActiveSummedOverModes(t *testing.T) {
	m := New(prometheus.NewRegistry(), Build{})
	check := func(when string) {
		t.Helper()
		for _, ch := range Channels {
			var sum float64
			for _, mode := range []protocol.Mode{protocol.ModeText, protocol.ModeVoice} {
				sum += testutil.ToFloat64(m.SessionsActive.WithLabelValues(string(mode), ch.String()))
			}
			if got := testutil.ToFloat64(m.ChannelSessions.WithLabelValues(ch.String())); got != sum {
				t.Fatalf("%s: channel_sessions_active{channel=%q} = %v, sessions_active summed over modes = %v",
					when, ch, got, sum)
			}
		}
	}
	m.SessionLive(ChannelBrowser)
	m.SessionLive(ChannelBrowser)
	m.SessionLive(ChannelTwilio)
	check("three live")
	m.SessionMode(protocol.ModeText, protocol.ModeVoice, ChannelTwilio)
	m.SessionMode(protocol.ModeText, protocol.ModeVoice, ChannelBrowser)
	check("two in voice")
	m.SessionEnded(protocol.DisconnectClientClosed, ChannelBrowser, protocol.ModeVoice, time.Second, 1)
	m.SessionMode(protocol.ModeVoice, protocol.ModeText, ChannelTwilio)
	check("one ended in voice, one back in text")
	m.SessionEnded(protocol.DisconnectClientClosed, ChannelTwilio, protocol.ModeText, time.Second, 2)
	m.SessionEnded(protocol.DisconnectClientClosed, ChannelBrowser, protocol.ModeText, time.Second, 0)
	check("all ended")
}
