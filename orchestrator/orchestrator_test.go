package orchestrator_test

import (
	"go.uber.org/goleak"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
)

// prompt bounds how long an answer that must not wait for a slow handler
// may take, with room for a loaded -race run; the handlers involved would
// take handlerSlow or forever.
const prompt = 1500 * time.Millisecond

func wantError(t *testing.T, out orchestrator.Outcome, typ tools.ErrorType, retryable, partial bool) {
	t.Helper()
	e := out.Envelope.Error
	if out.Envelope.OK || e == nil {
		t.Fatalf("envelope = %+v, want a %s error", out.Envelope, typ)
	}
	if e.Type != typ || e.Retryable != retryable || e.PartialSideEffects != partial {
		t.Errorf("error = %+v, want type %s retryable %v partialSideEffects %v", *e, typ, retryable, partial)
	}
	resp := errorOf(t, out)
	if resp["type"] != string(typ) || resp["message"] != e.Message || resp["retryable"] != retryable {
		t.Errorf("model response error = %#v, want the envelope's type, message and retryable", resp)
	}
}

func TestUnknownToolIsNotFoundAndCountedAsUnknown(t *testing.T) {
	f := newFixture(t)
	out := f.exec(t.Context(), "delete_all_orders", map[string]any{"confirm": true})

	wantError(t, out, tools.ErrNotFound, false, false)
	if strings.Contains(out.Envelope.Error.Message, "delete_all_orders") {
		t.Errorf("message %q echoes the invented name", out.Envelope.Error.Message)
	}
	if got := testutil.ToFloat64(f.m.ToolCalls.WithLabelValues("unknown", "not_found", "browser")); got != 1 {
		t.Errorf("tool_calls{tool=unknown,outcome=not_found} = %v, want 1", got)
	}
	for _, name := range []string{"turnstile_tool_calls_total", "turnstile_tool_duration_seconds", "turnstile_tool_result_chars"} {
		for _, m := range f.series(t, name) {
			if tool := label(m, "tool"); tool != "unknown" {
				t.Errorf("%s has a series for tool %q, want only \"unknown\"", name, tool)
			}
		}
	}
}

func TestToolOutsideItsModeIsRestrictedAndNotRun(t *testing.T) {
	f := newFixture(t)
	out := f.exec(t.Context(), "voice_only", nil)
	wantError(t, out, tools.ErrModeRestricted, false, false)
	if msg := out.Envelope.Error.Message; !strings.Contains(msg, "voice_only") || !strings.Contains(msg, "text") {
		t.Errorf("message %q, want it to name the tool and the mode", msg)
	}

	voice := f.orch.Execute(t.Context(), orchestrator.Call{ID: "c", Name: "voice_only", Mode: tools.ModeVoice})
	if !voice.Envelope.OK || voice.Response["output"] != "spoken" {
		t.Errorf("voice-mode call = %+v, want the tool's output", voice.Response)
	}
}

func TestInvalidArgumentsAreRefusedNamingTheProperty(t *testing.T) {
	cases := []struct {
		name string
		args map[string]any
		want string
	}{
		{"missing required", map[string]any{}, "'text'"},
		{"nil args count as empty", nil, "'text'"},
		{"wrong type", map[string]any{"text": 42}, "property 'text' must be a string"},
		{"too short", map[string]any{"text": ""}, "property 'text' must be at least 1"},
		{"unknown property", map[string]any{"text": "hi", "colour": "red"}, "'colour'"},
		{"not JSON-encodable", map[string]any{"text": math.Inf(1)}, "JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			out := f.exec(t.Context(), "echo", tc.args)
			wantError(t, out, tools.ErrValidation, false, false)
			if !strings.Contains(out.Envelope.Error.Message, tc.want) {
				t.Errorf("message %q, want it to contain %q", out.Envelope.Error.Message, tc.want)
			}
			if got := testutil.ToFloat64(f.m.ToolCalls.WithLabelValues("echo", "validation", "browser")); got != 1 {
				t.Errorf("tool_calls{echo,validation} = %v, want 1", got)
			}
		})
	}
}

func TestValidationMessageDoesNotEchoArgumentValues(t *testing.T) {
	f := newFixture(t)
	out := f.exec(t.Context(), "echo", map[string]any{"text": 7, "secret": 4111111111111111})
	wantError(t, out, tools.ErrValidation, false, false)
	if strings.Contains(out.Envelope.Error.Message, "4111111111111111") {
		t.Errorf("message %q echoes an argument value", out.Envelope.Error.Message)
	}
}

func TestSuccessfulCallAnswersWithOutput(t *testing.T) {
	f := newFixture(t)
	out := f.exec(t.Context(), "echo", map[string]any{"text": "hello"})

	if !out.Envelope.OK || out.Envelope.Error != nil {
		t.Fatalf("envelope = %+v, want ok", out.Envelope)
	}
	want := map[string]any{"v": 1, "ok": true, "output": map[string]any{"echo": "hello", "mode": "text", "session": "sess-1"},
		orchestrator.UntrustedMarker: true} // a test tool's output is not the gateway's
	if !reflect.DeepEqual(out.Response, want) {
		t.Errorf("response = %#v, want %#v (the handler's data, with the call's mode and session)", out.Response, want)
	}
	if out.Duration <= 0 || out.Envelope.Meta.DurationMs != out.Duration.Milliseconds() {
		t.Errorf("duration %v, meta.durationMs %d, want a positive duration mirrored in meta", out.Duration, out.Envelope.Meta.DurationMs)
	}
}

func TestSuccessWithoutDataAnswersOK(t *testing.T) {
	f := newFixture(t)
	out := f.exec(t.Context(), "noop", nil)
	if !out.Envelope.OK || !reflect.DeepEqual(out.Response, map[string]any{"v": 1, "ok": true, "output": "ok",
		orchestrator.UntrustedMarker: true}) {
		t.Errorf("response = %#v, want {output: ok}", out.Response)
	}
}

func TestHandlerErrorIsAnsweredAsError(t *testing.T) {
	f := newFixture(t)
	out := f.exec(t.Context(), "rate_limited", nil)
	wantError(t, out, tools.ErrRateLimit, true, false)
	if out.Envelope.Error.Message != "the backend asks to slow down" {
		t.Errorf("message = %q, want the handler's", out.Envelope.Error.Message)
	}
	if got := testutil.ToFloat64(f.m.ToolCalls.WithLabelValues("rate_limited", "rate_limit", "browser")); got != 1 {
		t.Errorf("tool_calls{rate_limited,rate_limit} = %v, want 1", got)
	}
}

func TestHandlerErrorWithoutTypeBecomesInternal(t *testing.T) {
	f := newFixture(t)
	out := f.exec(t.Context(), "fail_untyped", nil)
	wantError(t, out, tools.ErrInternal, false, false)
}

func TestTimeoutAnswersPromptlyAndCancelsTheHandler(t *testing.T) {
	f := newFixture(t)
	start := time.Now()
	out := f.exec(t.Context(), "slow", nil)
	elapsed := time.Since(start)

	wantError(t, out, tools.ErrTimeout, true, true)
	if elapsed > prompt {
		t.Errorf("TIMEOUT took %v, want it soon after the 50ms limit (the handler would take %v)", elapsed, handlerSlow)
	}
	if msg := out.Envelope.Error.Message; !strings.Contains(msg, "slow") || !strings.Contains(msg, "50ms") {
		t.Errorf("message %q, want it to name the tool and its limit", msg)
	}
	select {
	case err := <-f.slowCtxErr:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("handler saw ctx error %v, want DeadlineExceeded", err)
		}
	case <-time.After(prompt):
		t.Fatal("the handler's context was not cancelled")
	}
	if got := testutil.ToFloat64(f.m.ToolCalls.WithLabelValues("slow", "timeout", "browser")); got != 1 {
		t.Errorf("tool_calls{slow,timeout} = %v, want 1", got)
	}
}

func TestTimeoutDoesNotWaitForHandlerThatIgnoresContext(t *testing.T) {
	f := newFixture(t)
	start := time.Now()
	out := f.exec(t.Context(), "stubborn", nil)
	elapsed := time.Since(start)

	wantError(t, out, tools.ErrTimeout, true, true)
	if elapsed >= stubbornFor {
		t.Errorf("TIMEOUT took %v, want it before the handler's %v sleep ends", elapsed, stubbornFor)
	}
	select {
	case <-f.stubbornDone:
	case <-time.After(5 * time.Second):
		t.Fatal("stubborn handler never returned")
	}
}

// A handler that honours ctx returns as soon as the hard timeout fires. The
// model must still be told TIMEOUT, every time, not whatever the handler
// happened to return while giving up.
func TestTimeoutIsReportedWhenHandlerQuitsOnCancellation(t *testing.T) {
	f := newFixture(t)
	const runs = 40
	got := map[tools.ErrorType]int{}
	for range runs {
		out := f.exec(t.Context(), "quitter", nil)
		if out.Envelope.Error == nil {
			t.Fatalf("envelope = %+v, want an error", out.Envelope)
		}
		got[out.Envelope.Error.Type]++
	}
	if got[tools.ErrTimeout] != runs {
		t.Errorf("error types over %d timed-out calls = %v, want TIMEOUT every time", runs, got)
	}
}

func TestPanicBecomesInternalWithPartialSideEffects(t *testing.T) {
	f := newFixture(t)
	out := f.exec(t.Context(), "boom", nil)

	wantError(t, out, tools.ErrInternal, false, true)
	if strings.Contains(out.Envelope.Error.Message, "exploded") {
		t.Errorf("message %q leaks the panic value to the model", out.Envelope.Error.Message)
	}
	for _, want := range []string{"tool handler panicked", "handler exploded", "goroutine"} {
		if !f.log.Contains(want) {
			t.Errorf("log lacks %q (panic value and stack); log:\n%s", want, f.log)
		}
	}
	// The orchestrator survives: the next call works.
	if next := f.exec(t.Context(), "echo", map[string]any{"text": "still here"}); !next.Envelope.OK {
		t.Errorf("call after a panic = %+v, want ok", next.Envelope)
	}
}

func TestMalformedEnvelopeBecomesInternal(t *testing.T) {
	for _, name := range []string{"ok_with_error", "fail_without_error"} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			out := f.exec(t.Context(), name, nil)
			wantError(t, out, tools.ErrInternal, false, true)
			if _, ok := out.Response["output"]; ok {
				t.Errorf("response %#v passes the malformed data on", out.Response)
			}
		})
	}
}

func TestInvalidIntentBecomesInternal(t *testing.T) {
	for _, name := range []string{"bad_intent", "empty_pending"} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			out := f.exec(t.Context(), name, nil)
			wantError(t, out, tools.ErrInternal, false, true)
			if len(out.Envelope.Intents) != 0 {
				t.Errorf("intents %+v survive an invalid one", out.Envelope.Intents)
			}
		})
	}
}

func TestValidIntentIsKept(t *testing.T) {
	f := newFixture(t)
	out := f.exec(t.Context(), "good_intent", nil)
	want := []intents.Intent{{Type: intents.EndVoiceSession, Reason: "user said bye"}}
	if !out.Envelope.OK || !reflect.DeepEqual(out.Envelope.Intents, want) {
		t.Errorf("envelope = %+v, want ok with %+v", out.Envelope, want)
	}
}

func TestParentCancellationAnswersWithoutWaitingForHandler(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		<-f.blockerStarted
		cancel()
	}()

	done := make(chan orchestrator.Outcome, 1)
	go func() { done <- f.exec(ctx, "blocker", nil) }()
	select {
	case out := <-done:
		wantError(t, out, tools.ErrTransient, true, true)
	case <-time.After(prompt):
		close(f.blockerRelease)
		<-done
		t.Fatal("Execute kept waiting for the handler after its parent context was cancelled")
	}
}

// A call whose turn is already cancelled (barge-in, disconnect) is not run:
// an action tool must not take effect after the user interrupted, and the
// answer is an error, not a success nobody asked for.
func TestAlreadyCancelledParentAnswersError(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	before := goleak.IgnoreCurrent()
	const runs = 40
	oks := 0
	for range runs {
		if out := f.exec(ctx, "echo", map[string]any{"text": "hi"}); out.Envelope.OK {
			oks++
		}
	}
	if oks > 0 {
		t.Errorf("%d of %d calls with a cancelled parent context answered ok, want an error every time", oks, runs)
	}
	// A handler that was started runs on its own goroutine, possibly after
	// Execute returned: wait until every goroutine the calls started has
	// ended.
	testwait.ForNil(t, "the calls' goroutines to end", func() error { return goleak.Find(before) })
	if n := f.echoRuns.Load(); n > 0 {
		t.Errorf("the handler ran %d times for calls whose turn was already cancelled, want never", n)
	}
}

func TestHandlerGetsTheCallAndValidatedArgs(t *testing.T) {
	f := newFixture(t)
	out := f.orch.Execute(t.Context(), orchestrator.Call{ID: "c9", Name: "echo", Args: map[string]any{"text": "x"},
		SessionID: "sess-42", Mode: tools.ModeVoice})
	// Audio models get compact plain text rather than JSON (DESIGN §6 step 9).
	want := "echo: x. mode: voice. session: sess-42."
	if out.Response["output"] != want {
		t.Errorf("voice output = %#v, want %#v", out.Response["output"], want)
	}
	out = f.orch.Execute(t.Context(), orchestrator.Call{ID: "c10", Name: "echo", Args: map[string]any{"text": "x"},
		SessionID: "sess-42", Mode: tools.ModeText})
	if w := map[string]any{"echo": "x", "mode": "text", "session": "sess-42"}; !reflect.DeepEqual(out.Response["output"], w) {
		t.Errorf("text output = %#v, want %#v", out.Response["output"], w)
	}
}

func TestRedactedArgs(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name string
		tool string
		args map[string]any
		want map[string]any
	}{
		{"allow-listed key kept, others redacted", "echo",
			map[string]any{"text": "hello", "secret": "hunter2"},
			map[string]any{"text": "hello", "secret": tools.Redacted}},
		{"unknown tool: everything redacted", "made_up",
			map[string]any{"text": "hello", "card": "4111"},
			map[string]any{"text": tools.Redacted, "card": tools.Redacted}},
		{"tool with empty allow-list", "noop",
			map[string]any{"anything": 1},
			map[string]any{"anything": tools.Redacted}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := f.orch.RedactedArgs(tc.tool, tc.args)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("RedactedArgs(%s) = %#v, want %#v", tc.tool, got, tc.want)
			}
			if tc.args["secret"] != nil && tc.args["secret"] != "hunter2" {
				t.Error("RedactedArgs changed the caller's map")
			}
		})
	}
}

func TestMetricsObserveEveryCall(t *testing.T) {
	f := newFixture(t)
	ok := f.exec(t.Context(), "echo", map[string]any{"text": "hello"})
	f.exec(t.Context(), "echo", map[string]any{})
	f.exec(t.Context(), "boom", nil)

	for _, c := range []struct{ tool, outcome string }{{"echo", "ok"}, {"echo", "validation"}, {"boom", "internal"}} {
		if got := testutil.ToFloat64(f.m.ToolCalls.WithLabelValues(c.tool, c.outcome, "browser")); got != 1 {
			t.Errorf("tool_calls{%s,%s} = %v, want 1", c.tool, c.outcome, got)
		}
	}
	if n, _ := f.histogram(t, "turnstile_tool_duration_seconds", "echo"); n != 2 {
		t.Errorf("duration samples for echo = %d, want 2", n)
	}
	if n, _ := f.histogram(t, "turnstile_tool_duration_seconds", "boom"); n != 1 {
		t.Errorf("duration samples for boom = %d, want 1", n)
	}

	// The result size is that of what the model is sent.
	g := newFixture(t)
	g.exec(t.Context(), "echo", map[string]any{"text": "hello"})
	b, err := json.Marshal(ok.Response)
	if err != nil {
		t.Fatal(err)
	}
	if n, sum := g.histogram(t, "turnstile_tool_result_chars", "echo"); n != 1 || sum != float64(len(b)) {
		t.Errorf("result chars: %d samples summing %v, want 1 of %d", n, sum, len(b))
	}
}

// Seed 004 sizes responses in characters: a non-ASCII result is as many
// characters as it shows, not its UTF-8 bytes (up to 4 per character), in
// the size histogram, the token estimate (ceil(chars/4)) and the summary,
// in text (JSON) and voice (plain text) alike.
func TestResultSizeCountsCharactersNotBytes(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		mode       protocol.Mode
	}{
		{"accents", "héllo wörld", tools.ModeText},
		{"CJK", "你好，世界。日本語のテキスト", tools.ModeText},
		{"emoji", "🎉🚀😀 done ✅", tools.ModeText},
		{"voice plain text", "héllo wörld 你好 😀", tools.ModeVoice},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			out := f.orch.Execute(t.Context(), orchestrator.Call{ID: "c1", Name: "echo",
				Args: map[string]any{"text": tc.text}, SessionID: "sess-1", Mode: tc.mode, Turn: 1})
			if !out.Envelope.OK {
				t.Fatalf("echo failed: %+v", out.Envelope.Error)
			}
			b, err := json.Marshal(out.Response)
			if err != nil {
				t.Fatal(err)
			}
			chars := utf8.RuneCount(b)
			if chars == len(b) {
				t.Fatalf("response %s is ASCII; the case proves nothing", b)
			}
			if n, sum := f.histogram(t, "turnstile_tool_result_chars", "echo"); n != 1 || sum != float64(chars) {
				t.Errorf("result size: %d samples summing %v, want 1 of %d characters (%d bytes): %s", n, sum, chars, len(b), b)
			}
			wantTokens := (chars + 3) / 4
			if _, sum := f.histogram(t, "turnstile_tool_result_tokens", "echo"); sum != float64(wantTokens) {
				t.Errorf("result tokens = %v, want ceil(%d/4) = %d", sum, chars, wantTokens)
			}
			tv := f.m.Summary.Snapshot().Tools["echo"]
			if tv.ResultChars.P50 != float64(chars) || tv.ResultTokens.P95 != int64(wantTokens) {
				t.Errorf("summary = %+v tokens %+v, want %d chars, %d tokens", tv.ResultChars, tv.ResultTokens, chars, wantTokens)
			}
		})
	}
}

func TestConcurrentCallsAreIndependent(t *testing.T) {
	f := newFixture(t)
	const n = 24
	var wg sync.WaitGroup
	outs := make([]orchestrator.Outcome, n)
	for i := range n {
		wg.Go(func() {
			outs[i] = f.exec(t.Context(), "echo", map[string]any{"text": fmt.Sprint("msg-", i)})
		})
	}
	wg.Wait()
	for i, out := range outs {
		data, _ := out.Response["output"].(map[string]any)
		if data["echo"] != fmt.Sprint("msg-", i) {
			t.Errorf("call %d answered %#v", i, out.Response)
		}
	}
	if got := testutil.ToFloat64(f.m.ToolCalls.WithLabelValues("echo", "ok", "browser")); got != n {
		t.Errorf("tool_calls{echo,ok} = %v, want %d", got, n)
	}
}
