package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/otlptest"
	"github.com/turnstile-gw/turnstile/server"
	"github.com/turnstile-gw/turnstile/tracing"
)

// End-to-end tests of the OpenTelemetry traces: a browser speaking protocol
// v1, the real gateway exporting with the SDK's OTLP exporters, and an OTLP
// receiver in the test decoding what arrives.

// browserTraceparent is the browser's own span, sent in session.start.
const browserTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// tracedConfig is the configuration with tracing on towards rcv (the SDK's
// exporters read the process environment; the gateway reads env as well).
func tracedConfig(t *testing.T, rcv *otlptest.Receiver, env map[string]string) gateway.Config {
	t.Helper()
	rcv.Env(t)
	all := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.Endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": rcv.Protocol,
		"TURNSTILE_PSEUDONYM_KEY": strings.Repeat("p", 32)}
	for k, v := range env {
		all[k] = v
		t.Setenv(k, v)
	}
	cfg := configWith(t, all)
	if !cfg.Tracing.Enabled {
		t.Fatal("tracing is off with an OTLP endpoint set")
	}
	return cfg
}

// flushedSpans exports whatever the gateway has queued and returns what
// the receiver holds, by trace.
func flushedSpans(t *testing.T, g *testGateway, rcv *otlptest.Receiver) map[string][]otlptest.Span {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.gw.tracing.ForceFlush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	traces := map[string][]otlptest.Span{}
	for _, s := range rcv.Spans() {
		traces[s.TraceID] = append(traces[s.TraceID], s)
	}
	return traces
}

// oneTrace flushes the gateway's spans and checks that the receiver holds
// exactly one trace, whose spans it returns.
func oneTrace(t *testing.T, g *testGateway, rcv *otlptest.Receiver) []otlptest.Span {
	t.Helper()
	traces := flushedSpans(t, g, rcv)
	if len(traces) != 1 {
		t.Fatalf("%d traces, want one for the turn: %v", len(traces), traces)
	}
	for _, spans := range traces {
		return spans
	}
	return nil
}

// spansNamed returns the spans of a trace with that name.
func spansNamed(spans []otlptest.Span, name string) []otlptest.Span {
	var out []otlptest.Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// rootOf checks that a trace has exactly one invoke_agent root and that
// every other span hangs under it, and returns the root.
func rootOf(t *testing.T, spans []otlptest.Span) otlptest.Span {
	t.Helper()
	roots := spansNamed(spans, "invoke_agent")
	if len(roots) != 1 || roots[0].ParentID != "" {
		t.Fatalf("trace has %d invoke_agent roots: %+v", len(roots), spans)
	}
	for _, s := range spans {
		if s.Name != "invoke_agent" && s.ParentID != roots[0].SpanID {
			t.Errorf("span %s is not a child of the turn's root", s.Name)
		}
	}
	return roots[0]
}

// A text turn with a retrieval call and a call refused by the per-turn
// gate exports one trace: the turn's root, one chat span per model request
// and one execute_tool span per call, refused one included, received by a
// collector over OTLP/HTTP and over OTLP/gRPC.
func TestTextTurnExportsOneTraceWithEveryCallOverHTTPAndGRPC(t *testing.T) {
	for _, startReceiver := range []func(testing.TB) *otlptest.Receiver{otlptest.StartHTTP, otlptest.StartGRPC} {
		rcv := startReceiver(t)
		t.Run(rcv.Protocol, func(t *testing.T) {
			cfg := tracedConfig(t, rcv, map[string]string{"TURNSTILE_TEXT_MAX_RETRIEVAL": "1"})
			brain := fakegemini.NewScript(callStep(searchCall("opening hours"), getCall("opening-hours")),
				textStep("We open at nine."))
			g := startGateway(t, cfg, brain)
			c := g.dial("", nil)
			ready := c.start(map[string]any{"traceparent": browserTraceparent})
			evs := c.ask("When do you open?")
			res := map[string]event{}
			for _, r := range ofType(evs, "tool.result") {
				res[r.str("name")] = r
			}
			if len(res) != 2 || res["kb_search"]["ok"] != true || !refusedWith(res["kb_get"], "BUDGET_EXCEEDED") {
				t.Fatalf("tool results %v, want kb_search ok and kb_get refused over the budget", res)
			}

			spans := oneTrace(t, g, rcv)
			root := rootOf(t, spans)
			want := map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": ready.str("sessionId"),
				"turnstile.turn": int64(1), "turnstile.mode": "text", "turnstile.turn.end_reason": "end_turn",
				"enduser.pseudo.id": cfg.PseudonymOf(server.AnonymousUser)}
			for k, v := range want {
				if root.Attrs[k] != v {
					t.Errorf("root %s = %v, want %v", k, root.Attrs[k], v)
				}
			}
			if len(root.Links) != 1 || root.Links[0] != "4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7" {
				t.Errorf("root links %v, want the browser's traceparent", root.Links)
			}
			if root.Resource["service.name"] != "turnstile" {
				t.Errorf("service.name %v", root.Resource["service.name"])
			}

			chats := spansNamed(spans, "chat "+cfg.TextModel)
			if len(chats) != 2 {
				t.Fatalf("%d chat spans, want one per model request (2)", len(chats))
			}
			for _, ch := range chats {
				if ch.Attrs["gen_ai.operation.name"] != "chat" || ch.Attrs["gen_ai.provider.name"] != "gcp.gemini" ||
					ch.Attrs["gen_ai.request.model"] != cfg.TextModel {
					t.Errorf("chat span %v", ch.Attrs)
				}
				if _, ok := ch.Attrs["turnstile.model.time_to_first_chunk_ms"]; !ok {
					t.Errorf("chat span has no time to first chunk: %v", ch.Attrs)
				}
				if in, _ := ch.Attrs["gen_ai.usage.input_tokens"].(int64); in <= 0 {
					t.Errorf("chat span has no input token usage: %v", ch.Attrs)
				}
			}

			search := spansNamed(spans, "execute_tool kb_search")
			get := spansNamed(spans, "execute_tool kb_get")
			if len(search) != 1 || len(get) != 1 {
				t.Fatalf("execute_tool spans: kb_search %d, kb_get %d", len(search), len(get))
			}
			s, r := search[0].Attrs, get[0].Attrs
			if s["gen_ai.operation.name"] != "execute_tool" || s["gen_ai.tool.call.id"] != res["kb_search"].str("id") ||
				s["turnstile.tool.outcome"] != "ok" || s["turnstile.tool.shaped"] != false || s["turnstile.tool.result_chars"] == nil {
				t.Errorf("kb_search span %v", s)
			}
			if r["gen_ai.tool.call.id"] != res["kb_get"].str("id") || r["turnstile.tool.outcome"] != "refused" ||
				r["turnstile.tool.error_type"] != "BUDGET_EXCEEDED" || get[0].Error {
				t.Errorf("refused kb_get span %v (error status %v)", r, get[0].Error)
			}
			for _, sp := range spans {
				for _, k := range []string{"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments"} {
					if _, ok := sp.Attrs[k]; ok {
						t.Errorf("span %s carries %s without OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", sp.Name, k)
					}
				}
			}
			if n := g.counterSum("turnstile_trace_spans_dropped_total"); n != 0 {
				t.Errorf("%v spans dropped", n)
			}
		})
	}
}

// A voice turn with a tool call exports one trace: the voice turn's root
// with its barge-in and goAway events and its voice-to-voice latency, and
// the call's execute_tool span.
func TestVoiceTurnExportsOneTraceWithTheToolCallAndItsEvents(t *testing.T) {
	rcv := otlptest.StartGRPC(t)
	cfg := tracedConfig(t, rcv, nil)
	g, script := startVoiceGateway(t, cfg, nil)
	c := g.dial("", nil)
	ready := c.start(map[string]any{"mode": "voice", "traceparent": browserTraceparent})
	if ev := c.next(); ev.typ() != "mode" || ev.str("mode") != "voice" {
		t.Fatalf("after session.start voice: %v", ev)
	}
	u := nextUpstream(t, script)

	speak(t, c, u, true)
	must(t, u.SendInputTranscript("When do you open?"))
	ids, err := u.SendToolCall(searchCall("opening hours"))
	must(t, err)
	if res := last(untilResult(c, ids[0])); res["ok"] != true {
		t.Fatalf("tool.result %v", res)
	}
	must(t, u.SendGoAway(30*time.Second))
	must(t, u.SendOutputTranscript("We open at nine."))
	must(t, u.SendAudio(pcm(1, 4800)))
	must(t, u.SendInterrupted())
	must(t, u.SendTurnComplete(nil))
	evs := events(c.recvUntil("turn.done"))
	if end := last(evs); end.str("reason") != "interrupted" {
		t.Fatalf("turn.done %v", end)
	}

	spans := oneTrace(t, g, rcv)
	root := rootOf(t, spans)
	if root.Attrs["turnstile.mode"] != "voice" || root.Attrs["turnstile.turn.end_reason"] != "interrupted" ||
		root.Attrs["gen_ai.conversation.id"] != ready.str("sessionId") || len(root.Links) != 1 {
		t.Errorf("voice root %+v", root)
	}
	if !root.HasEvent(tracing.EventBargeIn) || !root.HasEvent(tracing.EventGoAway) {
		t.Errorf("voice root events %v, want barge-in and goAway", root.Events)
	}
	if ms, ok := root.Attrs[string(tracing.AttrVoiceResponseMs)]; !ok {
		t.Errorf("voice root has no %s: %v", tracing.AttrVoiceResponseMs, root.Attrs)
	} else if n, _ := strconv.ParseFloat(fmt.Sprint(ms), 64); n < 0 || n > latencyBound*1000 {
		t.Errorf("voice root %s = %v", tracing.AttrVoiceResponseMs, ms)
	}
	tool := spansNamed(spans, "execute_tool kb_search")
	if len(tool) != 1 || tool[0].Attrs["gen_ai.tool.call.id"] != ids[0] || tool[0].Attrs["turnstile.tool.outcome"] != "ok" {
		t.Fatalf("voice execute_tool spans %+v", tool)
	}
}

// An HTTP tool receives the W3C traceparent of its execute_tool span; with
// content capture on, the span holds the arguments and the result only
// through the tool's allow-lists, and the root the user's text and answer.
func TestHTTPToolReceivesTheTraceparentOfItsSpanAndCaptureKeepsToAllowLists(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Traceparent"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id": "T-1", "secretInternalNote": "do not show"}`))
	}))
	t.Cleanup(svc.Close)
	schema := `{"name": "open_ticket", "category": "action", "modes": ["text"],
  "redact": {"args": ["title"], "result": ["id"]},
  "http": {"url": "%s/tickets"},
  "parameters": {"type": "object", "properties": {"title": {"type": "string"}, "details": {"type": "string"}},
    "required": ["title"], "additionalProperties": false}}`
	rcv := otlptest.StartHTTP(t)
	cfg := tracedConfig(t, rcv, map[string]string{
		"TURNSTILE_TOOLS_DIR":                                toolsDir(t, map[string]string{"open_ticket": fmt.Sprintf(schema, svc.URL)}),
		"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
	})
	brain := fakegemini.NewScript(
		callStep(fakegemini.Call{Name: "open_ticket", Args: map[string]any{"title": "Noisy grinder", "details": "serial 99-1234"}}),
		textStep("Ticket T-1 is open."))
	g := startGateway(t, cfg, brain)
	c := g.dial("", nil)
	c.start(nil)
	if res := ofType(c.ask("open a ticket"), "tool.result"); len(res) != 1 || res[0]["ok"] != true {
		t.Fatalf("tool.result %v", res)
	}

	spans := oneTrace(t, g, rcv)
	root := rootOf(t, spans)
	tool := spansNamed(spans, "execute_tool open_ticket")
	if len(tool) != 1 {
		t.Fatalf("execute_tool spans %+v", spans)
	}
	want := "00-" + tool[0].TraceID + "-" + tool[0].SpanID + "-01"
	mu.Lock()
	got := append([]string(nil), seen...)
	mu.Unlock()
	if len(got) != 1 || got[0] != want {
		t.Errorf("the tool's service got traceparent %q, want its execute_tool span %q", got, want)
	}
	args, _ := tool[0].Attrs["gen_ai.tool.call.arguments"].(string)
	result, _ := tool[0].Attrs["gen_ai.tool.call.result"].(string)
	if !strings.Contains(args, "Noisy grinder") || strings.Contains(args, "99-1234") || !strings.Contains(args, "[redacted]") {
		t.Errorf("captured arguments %q: want the title, details redacted", args)
	}
	if !strings.Contains(result, "T-1") || strings.Contains(result, "do not show") {
		t.Errorf("captured result %q: want id only", result)
	}
	in, _ := root.Attrs["gen_ai.input.messages"].(string)
	out, _ := root.Attrs["gen_ai.output.messages"].(string)
	if !strings.Contains(in, "open a ticket") || !strings.Contains(out, "Ticket T-1 is open.") {
		t.Errorf("captured messages: in %q, out %q", in, out)
	}
}

// A collector that does not answer never holds a turn up: the turn ends,
// and the spans that do not fit the export queue are dropped and counted.
func TestStalledCollectorNeitherDelaysTurnsNorHidesDroppedSpans(t *testing.T) {
	rcv := otlptest.StartHTTP(t)
	rcv.Stall()
	cfg := tracedConfig(t, rcv, map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "1", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "1"})
	brain := fakegemini.NewScript(callStep(searchCall("hours")), textStep("Nine."), textStep("Yes."))
	g := startGateway(t, cfg, brain)
	c := g.dial("", nil)
	c.start(nil)
	for _, q := range []string{"When do you open?", "Really?"} {
		if end := last(c.ask(q)); end.str("reason") != "end_turn" {
			t.Fatalf("turn.done %v", end)
		}
	}
	// Two turns made five spans; the queue holds one at a time.
	if n := g.counterSum("turnstile_trace_spans_dropped_total"); n < 3 {
		t.Fatalf("%v spans counted as dropped, want at least 3 of 5", n)
	}
	rcv.Release()
}

// Tracing settings the gateway cannot honour stop it at start, naming the
// variable; a short pseudonym key is refused without echoing it.
func TestTracingSettingsAreCheckedAtStart(t *testing.T) {
	for want, env := range map[string]map[string]string{
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/json: must be http/protobuf or grpc": {
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
		"TURNSTILE_PSEUDONYM_KEY: must be at least 32 bytes": {"TURNSTILE_PSEUDONYM_KEY": "short-key"},
	} {
		_, err := loadTestConfig(t, nil, env)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "short-key") {
			t.Errorf("%v: err %v, want %q", env, err, want)
		}
	}
}

// A call that needs the user's approval: the refused call's span says the
// approval was asked, the user's answer is a confirm span of its own, and
// the repeated call's span says the approval was used.
func TestConfirmationAskedAnsweredAndUsedAreTraced(t *testing.T) {
	rcv := otlptest.StartHTTP(t)
	cfg := withPolicy(t, tracedConfig(t, rcv, nil), "tools:\n  kb_search:\n    requiresConfirmation: true\n")
	brain := fakegemini.NewScript(callStep(searchCall("hours")), textStep("I need your approval."),
		callStep(searchCall("hours")), textStep("We open at nine."))
	g := startGateway(t, cfg, brain)
	c := g.dial("", nil)
	ready := c.start(nil)
	reqs := ofType(c.ask("When do you open?"), "confirm.request")
	if len(reqs) != 1 {
		t.Fatalf("confirm.request %v", reqs)
	}
	confirm(c, reqs[0].str("token"), true)
	if done := c.next(); done.str("outcome") != "approved" {
		t.Fatalf("confirm answered %v", done)
	}
	c.until("turn.done")

	var confirmation []string
	var answers []otlptest.Span
	for _, spans := range flushedSpans(t, g, rcv) {
		for _, s := range spansNamed(spans, "execute_tool kb_search") {
			confirmation = append(confirmation, fmt.Sprint(s.Attrs["turnstile.tool.confirmation"]))
		}
		answers = append(answers, spansNamed(spans, "confirm kb_search")...)
	}
	if strings.Join(confirmation, ",") != "asked,approved" && strings.Join(confirmation, ",") != "approved,asked" {
		t.Errorf("kb_search spans' confirmation: %v, want asked and approved", confirmation)
	}
	if len(answers) != 1 || answers[0].Attrs["turnstile.tool.confirmation"] != "approved" ||
		answers[0].Attrs["gen_ai.conversation.id"] != ready.str("sessionId") || answers[0].Attrs["turnstile.turn"] != int64(1) {
		t.Errorf("confirm spans %+v", answers)
	}
}
