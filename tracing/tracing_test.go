package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/turnstile-gw/turnstile/internal/otlptest"
	"github.com/turnstile-gw/turnstile/internal/pseudonym"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func start(t *testing.T, getenv func(string) string, o Options) *Provider {
	t.Helper()
	s, err := SettingsFromEnv(getenv)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(context.Background(), s, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Shutdown(ctx)
	})
	return p
}

func flush(t *testing.T, p *Provider) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
}

// A turn's root span and its children reach a collector over both
// protocols, with the service name, the pseudonym (never the user ID), and
// the link to the browser's span.
func TestTurnTraceReachesTheCollectorOverHTTPAndGRPC(t *testing.T) {
	for _, start0 := range []func(testing.TB) *otlptest.Receiver{otlptest.StartHTTP, otlptest.StartGRPC} {
		rcv := start0(t)
		t.Run(rcv.Protocol, func(t *testing.T) {
			rcv.Env(t)
			t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=acme")
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test")
			users := pseudonym.Derive([]byte(strings.Repeat("k", 32)))
			p := start(t, getenvOS, Options{Users: users})
			browser := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2},
				TraceFlags: trace.FlagsSampled, Remote: true})
			ctx, root := p.StartTurn(context.Background(), Turn{Session: "s1", User: "alice@example.com", N: 3,
				Mode: "text", Link: browser})
			cctx, chat := StartChat(ctx, ProviderGemini, "gemini-x")
			chat.End()
			_ = cctx
			_, tool := StartTool(ctx, "kb_search", "call-1")
			tool.End()
			EndTurn(root, "end_turn")
			flush(t, p)

			spans := rcv.Spans()
			if len(spans) != 3 {
				t.Fatalf("got %d spans, want 3: %+v", len(spans), spans)
			}
			byName := map[string]otlptest.Span{}
			for _, s := range spans {
				byName[s.Name] = s
			}
			r := byName["invoke_agent"]
			if r.ParentID != "" || r.Attrs["gen_ai.conversation.id"] != "s1" || r.Attrs["turnstile.turn"] != int64(3) ||
				r.Attrs["turnstile.turn.end_reason"] != "end_turn" || r.Attrs["gen_ai.operation.name"] != "invoke_agent" {
				t.Errorf("root span: %+v", r)
			}
			if r.Attrs["enduser.pseudo.id"] != users.Of("alice@example.com") {
				t.Errorf("user shown as %v, want the pseudonym", r.Attrs["enduser.pseudo.id"])
			}
			for _, s := range spans {
				for k, v := range s.Attrs {
					if str, ok := v.(string); ok && strings.Contains(str, "alice") {
						t.Errorf("span %s attribute %s holds the raw user ID", s.Name, k)
					}
				}
			}
			if len(r.Links) != 1 || r.Links[0] != browser.TraceID().String()+"-"+browser.SpanID().String() {
				t.Errorf("root links %v, want the browser's span", r.Links)
			}
			if r.Resource["service.name"] != "turnstile" || r.Resource["deployment.environment.name"] != "test" {
				t.Errorf("resource %v", r.Resource)
			}
			c, tl := byName["chat gemini-x"], byName["execute_tool kb_search"]
			if c.ParentID != r.SpanID || c.TraceID != r.TraceID || c.Attrs["gen_ai.provider.name"] != "gcp.gemini" {
				t.Errorf("chat span: %+v", c)
			}
			if tl.ParentID != r.SpanID || tl.Attrs["gen_ai.tool.call.id"] != "call-1" || tl.Attrs["gen_ai.tool.name"] != "kb_search" {
				t.Errorf("tool span: %+v", tl)
			}
			if h := rcv.Headers(); len(h) == 0 || h[0]["X-Tenant"] != "acme" {
				t.Errorf("OTEL_EXPORTER_OTLP_HEADERS not sent: %v", h)
			}
		})
	}
}

// OTEL_SERVICE_NAME replaces the default service name.
func TestServiceNameFromTheEnvironment(t *testing.T) {
	rcv := otlptest.StartHTTP(t)
	rcv.Env(t)
	t.Setenv("OTEL_SERVICE_NAME", "support-gw")
	p := start(t, getenvOS, Options{Users: pseudonym.Random()})
	_, root := p.StartTurn(context.Background(), Turn{Session: "s", User: "u", N: 1, Mode: "text"})
	EndTurn(root, "error")
	flush(t, p)
	spans := rcv.Spans()
	if len(spans) != 1 || spans[0].Resource["service.name"] != "support-gw" || !spans[0].Error {
		t.Fatalf("spans %+v", spans)
	}
}

// A collector that does not answer never holds a turn up: spans that do
// not fit the queue are dropped and counted.
func TestStalledCollectorDropsAndCountsSpans(t *testing.T) {
	rcv := otlptest.StartHTTP(t)
	rcv.Env(t)
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "2")
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1")
	rcv.Stall()
	var mu sync.Mutex
	dropped := map[string]int{}
	p := start(t, getenvOS, Options{Users: pseudonym.Random(), Dropped: func(reason string, n int) {
		mu.Lock()
		dropped[reason] += n
		mu.Unlock()
	}})
	for i := range 10 {
		_, root := p.StartTurn(context.Background(), Turn{Session: "s", User: "u", N: i, Mode: "voice"})
		EndTurn(root, "end_turn") // returns at once, the collector stalled
	}
	mu.Lock()
	n := dropped[DropQueueFull]
	mu.Unlock()
	if n < 8 {
		t.Fatalf("dropped %v, want at least 8 of 10 spans counted as queue_full (2 fit the queue)", dropped)
	}
	rcv.Release()
}

// With no endpoint, or the SDK disabled, tracing is off: Start gives nil,
// and a nil provider's spans record nothing and cost no allocation.
func TestTracingOffIsFree(t *testing.T) {
	for _, env := range []map[string]string{
		{},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "none"},
	} {
		s, err := SettingsFromEnv(mapEnv(env))
		if err != nil || s.Enabled {
			t.Fatalf("%v: enabled %v, err %v", env, s.Enabled, err)
		}
		if p, err := Start(context.Background(), s, Options{}); p != nil || err != nil {
			t.Fatalf("%v: Start gave %v, %v", env, p, err)
		}
	}
	var p *Provider
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		tctx, root := p.StartTurn(ctx, Turn{Session: "s", User: "u", N: 1, Mode: "text"})
		_, chat := StartChat(tctx, ProviderGemini, "m")
		chat.End()
		_, tool := StartTool(tctx, "kb_search", "c1")
		tool.End()
		Event(tctx, EventBargeIn)
		EndTurn(root, "end_turn")
	})
	if allocs != 0 {
		t.Fatalf("tracing off allocates %.0f times per turn", allocs)
	}
}

func TestSettingsRefuseWhatTheGatewayCannotExport(t *testing.T) {
	for env, want := range map[string]string{
		"OTEL_EXPORTER_OTLP_PROTOCOL":        "OTEL_EXPORTER_OTLP_PROTOCOL=http/json: must be http/protobuf or grpc",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json",
		"OTEL_TRACES_EXPORTER":               "OTEL_TRACES_EXPORTER=http/json",
		"OTEL_BSP_MAX_QUEUE_SIZE":            "OTEL_BSP_MAX_QUEUE_SIZE=http/json",
	} {
		_, err := SettingsFromEnv(mapEnv(map[string]string{env: "http/json", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", env, err, want)
		}
	}
	s, err := SettingsFromEnv(mapEnv(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://x",
		"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
		"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "TRUE"}))
	if err != nil || !s.Enabled || s.Protocol != ProtocolGRPC || !s.CaptureContent {
		t.Fatalf("settings %+v, err %v", s, err)
	}
}

// Log lines written with a span's context carry its trace and span IDs.
func TestLogLinesInsideATurnCarryTraceAndSpanIDs(t *testing.T) {
	rcv := otlptest.StartHTTP(t)
	rcv.Env(t)
	p := start(t, getenvOS, Options{Users: pseudonym.Random()})
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("session", "s")
	ctx, root := p.StartTurn(context.Background(), Turn{Session: "s", User: "u", N: 1, Mode: "text"})
	tctx, tool := StartTool(ctx, "kb_search", "c1")
	log.InfoContext(tctx, "inside")
	log.Info("outside")
	tool.End()
	EndTurn(root, "end_turn")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var in, out map[string]any
	_ = json.Unmarshal([]byte(lines[0]), &in)
	_ = json.Unmarshal([]byte(lines[1]), &out)
	sc := trace.SpanContextFromContext(tctx)
	if in["trace_id"] != sc.TraceID().String() || in["span_id"] != sc.SpanID().String() || in["session"] != "s" {
		t.Errorf("line inside the turn: %v", in)
	}
	if _, has := out["trace_id"]; has {
		t.Errorf("line outside any span has a trace_id: %v", out)
	}
	// And the tool span's traceparent is what an HTTP tool is sent.
	h := map[string]string{}
	propagation.TraceContext{}.Inject(tctx, propagation.MapCarrier(h))
	if !strings.Contains(h["traceparent"], sc.SpanID().String()) {
		t.Errorf("traceparent %q does not carry the tool span", h["traceparent"])
	}
}

func mapEnv(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func getenvOS(k string) string { return os.Getenv(k) }

// The pseudonym key is the gateway's row and the OTEL_* variables the
// SDK's: reading the variables keeps the key the row set, and a key too
// short to be secret is refused.
func TestPseudonymKeySurvivesReadingTheOTELVariables(t *testing.T) {
	row := PseudonymKeySetting()
	var s Settings
	if err := row.Apply(&s, "short-key"); err == nil || err.Error() != "must be at least 32 bytes" {
		t.Errorf("a short key: err %v", err)
	}
	key := strings.Repeat("k", 32)
	if err := row.Apply(&s, key); err != nil {
		t.Fatal(err)
	}
	if err := s.ReadEnv(mapEnv(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"})); err != nil {
		t.Fatal(err)
	}
	if !s.Enabled || string(s.PseudonymKey) != key {
		t.Errorf("after ReadEnv: enabled %v, key kept %v", s.Enabled, string(s.PseudonymKey) == key)
	}
}
