package gateway_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/fake/fakeopenai"
)

// End-to-end tests of the orchestrator's pipeline as a browser and the
// model see them in text mode: budgets, loop detection, mode restriction,
// terminal tools, finish, restricted output, and what the operator sees on
// /metrics and /metrics/summary.

func TestSixthRetrievalInOneMessageIsRefusedAndTheNextTurnHasFreshBudgets(t *testing.T) {
	queries := []string{"shipping", "returns", "gift cards", "allergens", "brewing", "wholesale"}
	var six []fakegemini.Call
	for _, q := range queries {
		six = append(six, searchCall(q))
	}
	brain := fakegemini.NewScript(callStep(six...), textStep("Here is what I found."),
		callStep(searchCall("shipping")), textStep("Again."))
	g := startGateway(t, defaultTestConfig(t), brain)
	c := g.dial("", nil)
	c.start(nil)

	evs := c.ask("tell me everything")
	if n := len(ofType(evs, "tool.call")); n != 6 {
		t.Fatalf("%d tool.call events, want 6", n)
	}
	results := resultsInCallOrder(evs)
	for i := range 5 {
		if r := results[i]; r["ok"] != true || r["refused"] == true {
			t.Fatalf("call %d (%s) did not run: %v", i, queries[i], r)
		}
	}
	if r := results[5]; !refusedWith(r, "BUDGET_EXCEEDED") {
		t.Fatalf("6th retrieval call: %v, want refused BUDGET_EXCEEDED", r)
	}
	if last(evs).str("reason") != "end_turn" {
		t.Fatalf("turn.done = %v", last(evs))
	}

	// The model got one answer per call, the refused one an error.
	resp := lastResponses(t, brain.Requests()[1])
	if len(resp) != 6 {
		t.Fatalf("model got %d function responses, want 6", len(resp))
	}
	for i, r := range resp {
		typ, msg := responseError(r)
		switch {
		case i < 5 && typ != "":
			t.Fatalf("response %d is an error %s: %s", i, typ, msg)
		case i == 5 && (typ != "BUDGET_EXCEEDED" || !strings.Contains(msg, "5 retrieval calls")):
			t.Fatalf("refused call answered %s %q, want BUDGET_EXCEEDED naming the limit", typ, msg)
		}
	}

	// A new turn starts with its budget back.
	evs = c.ask("and shipping again?")
	if r := ofType(evs, "tool.result"); len(r) != 1 || r[0]["ok"] != true {
		t.Fatalf("next turn's retrieval: %v", r)
	}
	_, body := get(t, g.adminURL+"/metrics")
	if want := `turnstile_gate_refusals_total{gate="retrieval",mode="text"} 1`; !strings.Contains(body, want) {
		t.Fatalf("/metrics lacks %q", want)
	}
}

func TestTotalGateSpansTheTurnsIterations(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.Text.MaxCalls = 3
	brain := fakegemini.NewScript(
		callStep(searchCall("shipping"), getCall("shipping")),
		callStep(searchCall("returns"), getCall("returns-and-refunds")),
		textStep("done"),
	)
	g := startGateway(t, cfg, brain)
	c := g.dial("", nil)
	c.start(nil)
	evs := c.ask("shipping and returns")
	results := resultsInCallOrder(evs)
	for i := range 3 {
		if results[i]["ok"] != true {
			t.Fatalf("call %d within the budget: %v", i, results[i])
		}
	}
	if r := results[3]; !refusedWith(r, "BUDGET_EXCEEDED") {
		t.Fatalf("4th call of a 3-call turn: %v", r)
	}
	resp := lastResponses(t, brain.Requests()[2])
	if typ, msg := responseError(resp[1]); typ != "BUDGET_EXCEEDED" || !strings.Contains(msg, "3 tool calls") {
		t.Fatalf("model told %s %q", typ, msg)
	}
	_, body := get(t, g.adminURL+"/metrics")
	if want := `turnstile_gate_refusals_total{gate="total",mode="text"} 1`; !strings.Contains(body, want) {
		t.Fatalf("/metrics lacks %q", want)
	}
}

func TestThirdIdenticalSearchIsRefusedAsALoopWithoutEchoingTheQuery(t *testing.T) {
	const query = "shipping times to Oregon"
	brain := fakegemini.NewScript(callStep(searchCall(query)), callStep(searchCall(query)), callStep(searchCall(query)), textStep("ok"))
	g := startGateway(t, defaultTestConfig(t), brain)
	c := g.dial("", nil)
	c.start(nil)
	evs := c.ask("how fast?")
	results := resultsInCallOrder(evs)
	if results[0]["ok"] != true || results[1]["ok"] != true {
		t.Fatalf("first two searches must run: %v", results)
	}
	if r := results[2]; !refusedWith(r, "LOOP_DETECTED") {
		t.Fatalf("third identical search: %v", r)
	}
	typ, msg := responseError(lastResponses(t, brain.Requests()[3])[0])
	if typ != "LOOP_DETECTED" || msg == "" {
		t.Fatalf("model told %s %q", typ, msg)
	}
	for _, word := range strings.Fields(query) {
		if len(word) > 2 && strings.Contains(strings.ToLower(msg), strings.ToLower(word)) {
			t.Fatalf("loop message echoes the query (%q): %s", word, msg)
		}
	}
	_, body := get(t, g.adminURL+"/metrics")
	if want := `turnstile_loop_detections_total{rule="repeated_call"} 1`; !strings.Contains(body, want) {
		t.Fatalf("/metrics lacks %q", want)
	}
}

func TestRepeatingAnEmptySearchAfterTwoEmptyResultsIsRefusedButNewTermsRun(t *testing.T) {
	brain := fakegemini.NewScript(
		callStep(searchCall("xylophone zeppelin")), callStep(searchCall("quasar marmalade")),
		callStep(searchCall("xylophone zeppelin")), callStep(searchCall("shipping")), textStep("nothing"))
	g := startGateway(t, defaultTestConfig(t), brain)
	c := g.dial("", nil)
	c.start(nil)
	evs := c.ask("anything?")
	// The first two searches ran and found nothing.
	for i, req := range brain.Requests()[1:3] {
		out, _ := lastResponses(t, req)[0].Response["output"].(map[string]any)
		if res, ok := out["results"].([]any); !ok || len(res) != 0 {
			t.Fatalf("search %d was meant to find nothing: %v", i+1, out)
		}
	}
	// Asking again for what found nothing is a loop, and the model is told
	// what to do instead.
	if r := resultsInCallOrder(evs)[2]; !refusedWith(r, "LOOP_DETECTED") {
		t.Fatalf("the empty search repeated: %v", r)
	}
	_, msg := responseError(lastResponses(t, brain.Requests()[3])[0])
	if !strings.Contains(msg, "Data may not exist. Try different search terms or a different tool.") {
		t.Errorf("feedback %q, want the spec's advice", msg)
	}
	// Different terms may find something: they run.
	if r := resultsInCallOrder(evs)[3]; r["ok"] != true {
		t.Fatalf("a search with new terms: %v", r)
	}
	_, body := get(t, g.adminURL+"/metrics")
	if want := `turnstile_loop_detections_total{rule="empty_results"} 1`; !strings.Contains(body, want) {
		t.Fatalf("/metrics lacks %q", want)
	}
}

func TestCallsOutsideTheTextModesToolsAreRefused(t *testing.T) {
	brain := fakegemini.NewScript(callStep(
		fakegemini.Call{Name: "end_voice_session", Args: map[string]any{"reason": "bye"}},
		fakegemini.Call{Name: "open_pod_bay_doors", Args: map[string]any{}},
		fakegemini.Call{Name: "kb_get", Args: map[string]any{"id": "Not An Id!"}},
	), textStep("ok"))
	g := startGateway(t, defaultTestConfig(t), brain)
	c := g.dial("", nil)
	c.start(nil)
	evs := c.ask("switch things around")
	results := resultsInCallOrder(evs)
	want := []string{"MODE_RESTRICTED", "NOT_FOUND", "VALIDATION"}
	for i, typ := range want {
		if !refusedWith(results[i], typ) {
			t.Fatalf("call %d: %v, want refused %s", i, results[i], typ)
		}
	}
	if m := ofType(evs, "mode"); len(m) != 0 {
		t.Fatalf("mode changed: %v", m)
	}
	resp := lastResponses(t, brain.Requests()[1])
	if len(resp) != len(want) {
		t.Fatalf("model got %d function responses, want %d", len(resp), len(want))
	}
	for i, typ := range want {
		if got, _ := responseError(resp[i]); got != typ {
			t.Fatalf("model's response %d = %s, want %s", i, got, typ)
		}
	}
}

func TestMetricsSummaryShowsPerToolStatsAndContextTokens(t *testing.T) {
	brain := fakegemini.NewScript(callStep(searchCall("shipping"), searchCall("returns")), callStep(searchCall("gift cards")), textStep("ok"))
	g := startGateway(t, defaultTestConfig(t), brain)
	c := g.dial("", nil)
	c.start(nil)
	c.ask("a few questions")

	code, body := get(t, g.adminURL+"/metrics/summary")
	if code != 200 {
		t.Fatalf("/metrics/summary: HTTP %d", code)
	}
	var sum struct {
		Tools map[string]struct {
			Calls       int            `json:"calls"`
			Outcomes    map[string]int `json:"outcomes"`
			SizeSamples int            `json:"size_samples"`
			ResultChars struct {
				P50, P95, P99 float64
			} `json:"result_chars"`
			ResultTokens struct {
				Avg float64 `json:"avg"`
				P95 int     `json:"p95"`
			} `json:"result_tokens"`
			LatencySamples int `json:"latency_samples"`
		} `json:"tools"`
		ContextTokens map[string]int `json:"context_tokens"`
	}
	if err := json.Unmarshal([]byte(body), &sum); err != nil {
		t.Fatalf("summary is not JSON: %v\n%s", err, body)
	}
	kb := sum.Tools["kb_search"]
	if kb.Calls != 3 || kb.Outcomes["ok"] != 3 || kb.SizeSamples != 3 || kb.LatencySamples != 3 {
		t.Fatalf("kb_search summary = %+v", kb)
	}
	if kb.ResultChars.P50 <= 0 || kb.ResultChars.P50 > kb.ResultChars.P99 || kb.ResultTokens.Avg <= 0 {
		t.Fatalf("kb_search sizes = %+v", kb)
	}
	if got, want := sum.ContextTokens["text"], g.gw.sessions.InitTokens(); got <= 0 || got != want {
		t.Fatalf("context tokens for text = %d, want the session init estimate %d", got, want)
	}
}

func TestTerminalToolsOutputIsTheFinalAnswerExactly(t *testing.T) {
	cfg := withPolicy(t, defaultTestConfig(t), "tools:\n  kb_search:\n    terminal: true\n")
	brain := fakegemini.NewScript(
		callStep(searchCall("shipping"), fakegemini.Call{Name: "finish", Args: map[string]any{"note": "also done"}}),
		textStep("next"),
	)
	g := startGateway(t, cfg, brain)
	c := g.dial("", nil)
	c.start(nil)
	evs := c.ask("shipping?")
	if end := last(evs); end.str("reason") != "terminal_tool" {
		t.Fatalf("turn.done = %v, want terminal_tool", end)
	}
	// A turn has one terminal answer: the second terminal call is refused.
	results := resultsInCallOrder(evs)
	if results[0]["ok"] != true || results[1]["ok"] != false || errorType(results[1]) == "" {
		t.Fatalf("results = %v, want kb_search ok and finish refused", results)
	}
	if n := len(brain.Requests()); n != 1 {
		t.Fatalf("model called %d times after a terminal tool, want 1", n)
	}
	done := ofType(evs, "text.done")
	if len(done) != 1 || len(ofType(evs, "text.delta")) != 0 {
		t.Fatalf("answer events = %v", evs)
	}
	var answer struct {
		Results []struct{ ID string } `json:"results"`
	}
	if err := json.Unmarshal([]byte(done[0].str("text")), &answer); err != nil || len(answer.Results) == 0 ||
		answer.Results[0].ID != "shipping" {
		t.Fatalf("text.done %q is not kb_search's output: %v", done[0].str("text"), err)
	}

	// The next turn's history holds the tool's output and, as the model's
	// answer, exactly the text the user saw.
	c.ask("thanks")
	hist := brain.Requests()[1].Contents
	var modelSaid string
	var output any
	for _, ct := range hist {
		for _, p := range ct.Parts {
			if p.FunctionResponse != nil && p.FunctionResponse.Name == "kb_search" {
				output = p.FunctionResponse.Response["output"]
			}
			if ct.Role == "model" && p.Text != "" {
				modelSaid = p.Text
			}
		}
	}
	if modelSaid != done[0].str("text") {
		t.Fatalf("history holds %q as the answer, the user saw %q", modelSaid, done[0].str("text"))
	}
	var shown any
	_ = json.Unmarshal([]byte(modelSaid), &shown)
	if a, b := mustJSON(t, shown), mustJSON(t, output); a != b {
		t.Fatalf("final answer %s differs from the tool's output %s", a, b)
	}
}

func TestFinishEndsTheTurnWithItsNote(t *testing.T) {
	for name, tc := range map[string]struct {
		args map[string]any
		want string
	}{
		"with a note":    {map[string]any{"note": "Your order ships Monday."}, "Your order ships Monday."},
		"without a note": {map[string]any{}, "Finished"},
	} {
		t.Run(name, func(t *testing.T) {
			brain := fakegemini.NewScript(callStep(fakegemini.Call{Name: "finish", Args: tc.args}))
			g := startGateway(t, defaultTestConfig(t), brain)
			c := g.dial("", nil)
			c.start(nil)
			evs := c.ask("when does it ship?")
			if done := ofType(evs, "text.done"); len(done) != 1 || done[0].str("text") != tc.want {
				t.Fatalf("text.done = %v, want %q", done, tc.want)
			}
			if last(evs).str("reason") != "finish" {
				t.Fatalf("turn.done = %v, want finish", last(evs))
			}
			if n := len(brain.Requests()); n != 1 {
				t.Fatalf("model called %d times after finish", n)
			}
		})
	}
}

func TestRestrictedOutputAsksAgainUntilTheModelFinishes(t *testing.T) {
	const rule = "ANSWER THROUGH finish ONLY."
	cfg := defaultTestConfig(t)
	cfg.RestrictOutput, cfg.RestrictionMessage = true, rule
	finish := func(note string) func(*fakegemini.Request) fakegemini.Reply {
		return callStep(fakegemini.Call{Name: "finish", Args: map[string]any{"note": note}})
	}
	brain := fakegemini.NewScript(textStep("a plain answer the user must not see"), finish("Ships in two days."),
		finish("You're welcome."))
	g := startGateway(t, cfg, brain)
	c := g.dial("", nil)
	c.start(nil)
	evs := c.ask("how fast?")
	for _, ev := range evs {
		if ev.typ() == "text.delta" || (ev.typ() == "text.done" && ev.str("text") != "Ships in two days.") {
			t.Fatalf("the user saw %v", ev)
		}
	}
	if len(ofType(evs, "text.done")) != 1 || last(evs).str("reason") != "finish" {
		t.Fatalf("turn events = %v", evs)
	}
	c.ask("thanks")
	reqs := brain.Requests()
	if len(reqs) != 3 {
		t.Fatalf("model called %d times, want 3", len(reqs))
	}
	base := systemText(reqs[0])
	if got := systemText(reqs[2]); got != base {
		t.Fatalf("the next turn's system instruction changed:\n%q\nwant\n%q", got, base)
	}
	// Gemini has no system role inside contents: the second call carries
	// the restriction in the system instruction's turn note, after the base
	// prompt unchanged, and its contents end on the user's message, as the
	// first call's did (the rejected answer is not sent back).
	if got, want := systemText(reqs[1]), base+"\n\n# Note for this turn\n"+rule; got != want {
		t.Fatalf("second call's system instruction:\n%q\nwant\n%q", got, want)
	}
	if a, b := mustJSON(t, reqs[1].Contents), mustJSON(t, reqs[0].Contents); a != b || strings.Contains(a, rule) {
		t.Fatalf("second call's contents %s, want the first call's %s", a, b)
	}
	// The next turn's history holds neither.
	if got := mustJSON(t, reqs[2].Contents); strings.Contains(got, rule) || strings.Contains(got, "must not see") {
		t.Fatalf("the next turn's history holds what the user never saw: %s", got)
	}
}

// Seed 000 resets the injection counter after each tool step: with one
// injection allowed, a plain answer after a tool round is corrected again
// instead of becoming the answer.
func TestRestrictedOutputCorrectsAPlainAnswerAgainAfterAToolRound(t *testing.T) {
	const rule = "ANSWER THROUGH finish ONLY."
	cfg := defaultTestConfig(t)
	cfg.RestrictOutput, cfg.RestrictionMessage, cfg.RestrictionMaxInjections = true, rule, 1
	brain := fakegemini.NewScript(
		textStep("plain answer before looking"),
		callStep(fakegemini.Call{Name: "kb_search", Args: map[string]any{"query": "returns"}}),
		textStep("plain answer after looking"),
		callStep(fakegemini.Call{Name: "finish", Args: map[string]any{"note": "Returns take 30 days."}}))
	g := startGateway(t, cfg, brain)
	c := g.dial("", nil)
	c.start(nil)
	evs := c.ask("how do returns work?")
	if done := ofType(evs, "text.done"); len(done) != 1 || done[0].str("text") != "Returns take 30 days." {
		t.Fatalf("text.done = %v, want finish's note, not the plain answer after the tool round", done)
	}
	if r := last(evs).str("reason"); r != "finish" {
		t.Fatalf("turn.done reason %q, want finish", r)
	}
	reqs := brain.Requests()
	if len(reqs) != 4 {
		t.Fatalf("model called %d times, want 4", len(reqs))
	}
	if got := systemText(reqs[3]); !strings.HasSuffix(got, "# Note for this turn\n"+rule) {
		t.Fatalf("fourth call's system instruction ends %q, want the restriction in the turn note", got[max(0, len(got)-80):])
	}
}

// OpenAI-compatible models have a system role anywhere in the
// conversation: the reminder is a system message right after the rejected
// answer, never a user message, and the leading system prompt is unchanged.
func TestOpenAIRestrictionReminderIsASystemMessage(t *testing.T) {
	const rule = "ANSWER THROUGH finish ONLY."
	brain := fakeopenai.NewScript(
		fakeopenai.Fixed(fakeopenai.TextReply("a plain answer", 1)),
		fakeopenai.Fixed(fakeopenai.CallReply(fakeopenai.Call{ID: "call_f", Name: "finish",
			Pieces: []string{`{"note":"Done."}`}})))
	cfg := openAIConfig(t, brain)
	cfg.RestrictOutput, cfg.RestrictionMessage = true, rule
	g := startGateway(t, cfg, nil)
	c := g.dial("", nil)
	c.start(nil)
	evs := c.ask("hi")
	if r := last(evs).str("reason"); r != "finish" {
		t.Fatalf("turn.done = %v, want finish", last(evs))
	}
	reqs := brain.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model called %d times, want 2", len(reqs))
	}
	first, second := reqs[0].Messages, reqs[1].Messages
	n := len(second)
	if n < 3 || second[n-2].Role != "assistant" || second[n-2].Content != "a plain answer" ||
		second[n-1].Role != "system" || second[n-1].Content != rule {
		t.Fatalf("second request ends with %s, want the rejected answer then a system message", mustJSON(t, second[max(0, n-3):]))
	}
	if first[0].Role != "system" || second[0].Role != "system" || second[0].Content != first[0].Content || strings.Contains(string(first[0].Content), rule) {
		t.Fatalf("leading system prompt changed or holds the rule: %q / %q", first[0].Content, second[0].Content)
	}
	for _, m := range second {
		if m.Role == "user" && m.Content == rule {
			t.Fatalf("the reminder was sent as a user message")
		}
	}
}

func TestRestrictedOutputGivesUpOnAStubbornModel(t *testing.T) {
	for name, tc := range map[string]struct {
		maxInjections, maxIterations, wantRequests int
	}{
		"one injection":           {1, 20, 2},
		"unlimited, by iteration": {0, 3, 3},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := defaultTestConfig(t)
			cfg.RestrictOutput, cfg.RestrictionMaxInjections, cfg.MaxToolIterations = true, tc.maxInjections, tc.maxIterations
			var steps []func(*fakegemini.Request) fakegemini.Reply
			for i := range tc.wantRequests + 1 {
				steps = append(steps, textStep(fmt.Sprintf("plain answer %d", i+1)))
			}
			brain := fakegemini.NewScript(steps...)
			g := startGateway(t, cfg, brain)
			c := g.dial("", nil)
			c.start(nil)
			evs := c.ask("how fast?")
			if n := len(brain.Requests()); n != tc.wantRequests {
				t.Fatalf("model called %d times, want %d", n, tc.wantRequests)
			}
			want := fmt.Sprintf("plain answer %d", tc.wantRequests)
			if done := ofType(evs, "text.done"); len(done) != 1 || done[0].str("text") != want {
				t.Fatalf("text.done = %v, want the model's last text %q", done, want)
			}
			if last(evs).str("reason") != "end_turn" {
				t.Fatalf("turn.done = %v", last(evs))
			}
		})
	}
}

// /metrics/summary carries the seed's keys beside its own: the session-init
// estimate split into system prompt and tool declarations, and how many
// live sessions hold loop-detection state for how many turns.
func TestMetricsSummarySpeaksTheSeedsContextAndLoopDetectionKeys(t *testing.T) {
	brain := fakegemini.NewScript(callStep(searchCall("shipping")), textStep("ok"),
		callStep(searchCall("returns")), textStep("ok"))
	g := startGateway(t, defaultTestConfig(t), brain)
	c := g.dial("", nil)
	c.start(nil)
	type seedKeys struct {
		Context struct {
			SessionInitTokens  *int `json:"sessionInitTokens"`
			SystemPromptTokens *int `json:"systemPromptTokens"`
			ToolDeclTokens     *int `json:"toolDeclTokens"`
		} `json:"context"`
		LoopDetection struct {
			ActiveSessions    *int `json:"activeSessions"`
			TotalTurnsTracked *int `json:"totalTurnsTracked"`
		} `json:"loopDetection"`
	}
	summary := func() seedKeys {
		code, body := get(t, g.adminURL+"/metrics/summary")
		var s seedKeys
		if err := json.Unmarshal([]byte(body), &s); code != 200 || err != nil {
			t.Fatalf("/metrics/summary: HTTP %d, %v\n%s", code, err, body)
		}
		if s.Context.SessionInitTokens == nil || s.Context.SystemPromptTokens == nil || s.Context.ToolDeclTokens == nil ||
			s.LoopDetection.ActiveSessions == nil || s.LoopDetection.TotalTurnsTracked == nil {
			t.Fatalf("/metrics/summary lacks a seed key:\n%s", body)
		}
		return s
	}
	for turn := 1; turn <= 2; turn++ {
		c.ask("a question")
		s := summary()
		ctx, loops := s.Context, s.LoopDetection
		if init := g.gw.sessions.InitTokens(); *ctx.SessionInitTokens != init || *ctx.SystemPromptTokens <= 0 ||
			*ctx.ToolDeclTokens <= 0 || *ctx.SystemPromptTokens+*ctx.ToolDeclTokens != init {
			t.Fatalf("context: init %d = system %d + tools %d, want the session init estimate %d",
				*ctx.SessionInitTokens, *ctx.SystemPromptTokens, *ctx.ToolDeclTokens, init)
		}
		if *loops.ActiveSessions != 1 || *loops.TotalTurnsTracked != turn {
			t.Fatalf("after turn %d: loopDetection activeSessions %d, totalTurnsTracked %d; want 1 and %d",
				turn, *loops.ActiveSessions, *loops.TotalTurnsTracked, turn)
		}
	}
}
