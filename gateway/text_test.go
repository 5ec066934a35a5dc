package gateway_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
)

func TestOfflineDemoAnswersFromKnowledgeBaseThroughKBSearch(t *testing.T) {
	g := startGateway(t, defaultTestConfig(t), nil)
	c := g.dial("", nil)
	ready := c.start(nil)
	if model, _ := ready["model"].(map[string]any); model["offline"] != true || ready.str("notice") == "" {
		t.Fatalf("session.ready does not say the model is the offline demo: %v", ready)
	}
	if ready.str("sessionId") == "" || ready.str("resumeToken") == "" || ready["resumed"] != false ||
		ready.str("registryVersion") == "" {
		t.Fatalf("session.ready incomplete: %v", ready)
	}

	evs := c.ask("How do I return a bag of coffee?")
	calls := ofType(evs, "tool.call")
	if len(calls) < 1 || calls[0].str("name") != "kb_search" {
		t.Fatalf("expected a kb_search call first, got %v", evs)
	}
	for _, r := range ofType(evs, "tool.result") {
		if r["ok"] != true {
			t.Fatalf("tool failed: %v", r)
		}
	}
	done := ofType(evs, "text.done")
	if len(done) != 1 || !strings.Contains(strings.ToLower(done[0].str("text")), "return") {
		t.Fatalf("answer does not come from the returns document: %v", done)
	}
	var streamed strings.Builder
	for _, d := range ofType(evs, "text.delta") {
		streamed.WriteString(d.str("text"))
	}
	if streamed.String() != done[0].str("text") {
		t.Fatalf("deltas %q do not add up to the final text %q", streamed.String(), done[0].str("text"))
	}
	if end := last(evs); end.str("reason") != "end_turn" || end["turn"] != float64(1) {
		t.Fatalf("turn.done = %v", end)
	}
	if n := testutil.ToFloat64(g.gw.sessions.Metrics.ToolCalls.WithLabelValues("kb_search", "ok", "browser")); n != 1 {
		t.Fatalf("turnstile_tool_calls_total{kb_search,ok} = %v", n)
	}
}

func TestEveryTurnEventCarriesItsTurnNumber(t *testing.T) {
	brain := fakegemini.NewScript(
		fakegemini.Fixed(fakegemini.TextReply("one", 2)),
		fakegemini.Fixed(fakegemini.TextReply("two", 2)),
	)
	g := startGateway(t, defaultTestConfig(t), brain)
	c := g.dial("", nil)
	c.start(nil)
	for want, q := range []string{"first", "second"} {
		for _, ev := range c.ask(q) {
			if ev["turn"] != float64(want+1) {
				t.Fatalf("event %v of turn %d has the wrong turn", ev, want+1)
			}
		}
	}
}

func TestToolCallsAreValidatedAndAnsweredToTheModel(t *testing.T) {
	brain := fakegemini.NewScript(
		fakegemini.Fixed(fakegemini.CallReply(
			fakegemini.Call{Name: "kb_search", Args: map[string]any{"query": "", "limit": 99}},
			fakegemini.Call{Name: "launch_rockets", Args: map[string]any{"secret": "s3cret"}},
			fakegemini.Call{Name: "kb_get", Args: map[string]any{"id": "returns-and-refunds"}},
		)),
		fakegemini.Fixed(fakegemini.TextReply("done", 1)),
	)
	g := startGateway(t, defaultTestConfig(t), brain)
	c := g.dial("", nil)
	c.start(nil)
	evs := c.ask("go")

	results := map[string]event{}
	for _, r := range ofType(evs, "tool.result") {
		results[r.str("name")] = r
	}
	errType := func(name string) string {
		e, _ := results[name]["error"].(map[string]any)
		s, _ := e["type"].(string)
		return s
	}
	if errType("kb_search") != "VALIDATION" || errType("launch_rockets") != "NOT_FOUND" || results["kb_get"]["ok"] != true {
		t.Fatalf("tool results = %v", results)
	}
	for _, call := range ofType(evs, "tool.call") {
		if call.str("name") == "launch_rockets" {
			if b, _ := json.Marshal(call["args"]); strings.Contains(string(b), "s3cret") {
				t.Fatalf("arguments of an unknown tool reached the browser: %s", b)
			}
		}
	}

	// The model got exactly one answer per call, in order, errors included.
	reqs := brain.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model called %d times, want 2", len(reqs))
	}
	var responses []*genai.FunctionResponse
	for _, p := range reqs[1].Contents[len(reqs[1].Contents)-1].Parts {
		if p.FunctionResponse != nil {
			responses = append(responses, p.FunctionResponse)
		}
	}
	if len(responses) != 3 {
		t.Fatalf("model got %d function responses, want 3", len(responses))
	}
	for i, want := range []string{"kb_search", "launch_rockets", "kb_get"} {
		if responses[i].Name != want {
			t.Fatalf("response %d is for %s, want %s", i, responses[i].Name, want)
		}
	}
	if _, ok := responses[0].Response["error"]; !ok {
		t.Fatalf("invalid call answered without an error: %v", responses[0].Response)
	}
	if out, _ := responses[2].Response["output"].(map[string]any); out["id"] != "returns-and-refunds" {
		t.Fatalf("kb_get output = %v", responses[2].Response)
	}
	// Tool declarations reached the model with their JSON Schema.
	// Exactly the tools allowed in text mode were declared, with their JSON Schema.
	var declared []string
	for _, d := range reqs[0].Tools[0].FunctionDeclarations {
		if d.ParametersJsonSchema == nil {
			t.Fatalf("%s declared without a schema", d.Name)
		}
		declared = append(declared, d.Name)
	}
	if got := strings.Join(declared, ","); got != "finish,ignore_user,kb_get,kb_search,request_human,start_voice_session" {
		t.Fatalf("tools declared in text mode: %s", got)
	}
	if !strings.Contains(reqs[0].SystemInstruction.Parts[0].Text, "kb_search") {
		t.Fatal("the system instruction does not carry the tool guides")
	}
}

func TestTurnStopsAtMaxToolIterations(t *testing.T) {
	search := fakegemini.Fixed(fakegemini.CallReply(fakegemini.Call{Name: "kb_search", Args: map[string]any{"query": "beans"}}))
	brain := fakegemini.NewScript(search, search, search)
	cfg := defaultTestConfig(t)
	cfg.MaxToolIterations = 2
	g := startGateway(t, cfg, brain)
	c := g.dial("", nil)
	c.start(nil)
	evs := c.ask("loop forever")
	if end := last(evs); end.str("reason") != "max_iterations" {
		t.Fatalf("turn.done = %v, want max_iterations", end)
	}
	if errs := ofType(evs, "error"); len(errs) != 1 || errs[0].str("code") != "max_iterations" ||
		errs[0].str("message") != "max tool iterations (2) exceeded" {
		t.Fatalf("errors = %v, want one max_iterations error before turn.done", errs)
	}
	if n := len(brain.Requests()); n != 2 {
		t.Fatalf("model called %d times, want 2", n)
	}
	if n := len(ofType(evs, "tool.result")); n != 2 {
		t.Fatalf("%d tool results, want 2", n)
	}
}

func TestModelFailuresEndTheTurnWithAnHonestError(t *testing.T) {
	cases := []struct {
		name      string
		reply     fakegemini.Reply
		code      string
		retryable bool
	}{
		{"rate limited", fakegemini.ErrorReply(429, "RESOURCE_EXHAUSTED", "quota"), "model_error", true},
		{"server error", fakegemini.ErrorReply(500, "INTERNAL", "boom"), "model_error", true},
		{"bad request", fakegemini.ErrorReply(400, "INVALID_ARGUMENT", "bad"), "model_error", false},
		{"truncated", fakegemini.Reply{Chunks: []fakegemini.Chunk{{Text: "The answer is"}}}, "model_truncated", true},
		{"mid-stream error", fakegemini.Reply{Chunks: []fakegemini.Chunk{{Text: "Partial"}},
			MidStreamError: &fakegemini.APIError{Code: 503, Message: "overloaded", Status: "UNAVAILABLE"}}, "model_error", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			brain := fakegemini.NewScript(fakegemini.Fixed(tc.reply), fakegemini.Fixed(fakegemini.TextReply("fine now", 1)))
			g := startGateway(t, defaultTestConfig(t), brain)
			c := g.dial("", nil)
			c.start(nil)
			evs := c.ask("first question")
			errs := ofType(evs, "error")
			if len(errs) != 1 || errs[0].str("code") != tc.code || errs[0]["retryable"] != tc.retryable {
				t.Fatalf("errors = %v, want one %s retryable=%v", errs, tc.code, tc.retryable)
			}
			if len(ofType(evs, "text.done")) != 0 {
				t.Fatal("a failed turn produced a final answer")
			}
			if end := last(evs); end.str("reason") != "error" {
				t.Fatalf("turn.done = %v", end)
			}
			// The session goes on, and the failed turn's message is in the history.
			evs = c.ask("second question")
			if last(evs).str("reason") != "end_turn" {
				t.Fatalf("second turn: %v", evs)
			}
			var texts []string
			for _, content := range brain.Requests()[1].Contents {
				for _, p := range content.Parts {
					texts = append(texts, p.Text)
				}
			}
			if got := strings.Join(texts, "|"); got != "first question|second question" {
				t.Fatalf("history sent to the model = %q", got)
			}
		})
	}
}

func TestCancelledTurnSaysSoAndTheSessionGoesOn(t *testing.T) {
	brain := fakegemini.NewScript(
		fakegemini.Fixed(fakegemini.Reply{Chunks: []fakegemini.Chunk{{Text: "thinking"}}, Hang: true}),
		fakegemini.Fixed(fakegemini.TextReply("back", 1)),
	)
	g := startGateway(t, defaultTestConfig(t), brain)
	c := g.dial("", nil)
	c.start(nil)
	c.send(map[string]any{"type": "text", "text": "slow one"})
	c.until("text.delta")
	c.send(map[string]any{"type": "text", "text": "impatient"})
	if ev := c.next(); ev.str("code") != "turn_in_progress" || ev["retryable"] != true {
		t.Fatalf("second text during a turn: %v", ev)
	}
	c.send(map[string]any{"type": "turn.cancel"})
	evs := c.until("turn.done")
	if errs := ofType(evs, "error"); len(errs) != 1 || errs[0].str("code") != "turn_cancelled" || errs[0]["retryable"] != true {
		t.Fatalf("cancel events = %v", evs)
	}
	if last(evs).str("reason") != "interrupted" {
		t.Fatalf("turn.done = %v", last(evs))
	}
	if evs := c.ask("again"); ofType(evs, "text.done")[0].str("text") != "back" {
		t.Fatalf("after cancel: %v", evs)
	}
}

func TestResumedHistoryKeepsTurnNumbersAfterTrimming(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.HistoryMax = 4 // two turns of user + answer
	step := fakegemini.Fixed(fakegemini.TextReply("ok", 1))
	g := startGateway(t, cfg, fakegemini.NewScript(step, step, step, step))
	c := g.dial("", nil)
	ready := c.start(nil)
	for _, q := range []string{"one", "two", "three", "four"} {
		c.ask(q)
	}
	_ = c.c.CloseNow()
	c2 := g.dial("", nil)
	again := c2.start(map[string]any{"resume": map[string]any{
		"sessionId": ready.str("sessionId"), "resumeToken": ready.str("resumeToken")}})
	var got []string
	for _, h := range again["history"].([]any) {
		item := h.(map[string]any)
		got = append(got, fmt.Sprintf("%v:%v:%v", item["turn"], item["role"], item["text"]))
	}
	if s := strings.Join(got, "|"); s != "3:user:three|3:model:ok|4:user:four|4:model:ok" {
		t.Fatalf("resumed history = %s", s)
	}
}
