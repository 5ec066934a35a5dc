package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/fake/fakeopenai"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// openAIConfig is the default test configuration with the openai text
// provider, aimed at a fake OpenAI-compatible server that demands a key.
func openAIConfig(t *testing.T, brain fakeopenai.Brain) gateway.Config {
	t.Helper()
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("OPENAI_API_KEY", "")
	const key = "sk-gateway-test-key"
	s := fakeopenai.New(brain, fakeopenai.Options{APIKey: key})
	base, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	cfg := defaultTestConfig(t)
	cfg.TextProvider, cfg.OpenAIBaseURL, cfg.OpenAIAPIKey, cfg.OpenAIModel = "openai", gateway.SecretURL(base), key, "llama-test"
	return cfg
}

func TestOpenAIProviderRunsATextTurnWithAKBSearchCall(t *testing.T) {
	brain := fakeopenai.NewScript(
		fakeopenai.Fixed(fakeopenai.CallReply(fakeopenai.Call{ID: "call_kb1", Name: "kb_search",
			Pieces: []string{`{"query":"ret`, `urn a bag \u00`, `e0 coffee","li`, `mit":2}`}})),
		fakeopenai.Fixed(fakeopenai.TextReply("Unopened bags can be returned within 30 days.", 3)),
	)
	g := startGateway(t, openAIConfig(t, brain), nil)
	c := g.dial("", nil)
	ready := c.start(nil)
	if model, _ := ready["model"].(map[string]any); model["name"] != "llama-test" || model["offline"] != false {
		t.Fatalf("session.ready model = %v, want llama-test, not offline", ready["model"])
	}

	evs := c.ask("Can I return coffee?")
	calls, results, argEvs := ofType(evs, "tool.call"), ofType(evs, "tool.result"), ofType(evs, "tool.args")
	if len(calls) != 1 || calls[0].str("name") != "kb_search" || calls[0].str("id") != "call_kb1" {
		t.Fatalf("tool.call events = %v, want kb_search with the model's id", calls)
	}
	// The call is shown as soon as its name is known, its arguments once
	// they are complete.
	if _, has := calls[0]["args"]; has || len(argEvs) != 1 || argEvs[0].str("id") != "call_kb1" {
		t.Fatalf("tool.call %v then tool.args %v, want the call announced without args, then its args", calls, argEvs)
	}
	if args, _ := argEvs[0]["args"].(map[string]any); args["query"] != "return a bag à coffee" {
		t.Errorf("tool.args args = %v, want the arguments assembled from their fragments", argEvs[0]["args"])
	}
	if indexOf(evs, "tool.call") > indexOf(evs, "tool.args") || indexOf(evs, "tool.args") > indexOf(evs, "tool.result") {
		t.Errorf("events out of order: %v", evs)
	}
	if len(results) != 1 || results[0]["ok"] != true || results[0].str("id") != "call_kb1" {
		t.Fatalf("tool.result events = %v", results)
	}
	if done := ofType(evs, "text.done"); len(done) != 1 || done[0].str("text") != "Unopened bags can be returned within 30 days." {
		t.Fatalf("text.done = %v", done)
	}
	if end := last(evs); end.str("reason") != "end_turn" {
		t.Fatalf("turn.done = %v", end)
	}

	reqs := brain.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model called %d times, want 2", len(reqs))
	}
	var declared []string
	for _, tool := range reqs[0].Tools {
		declared = append(declared, tool.Function.Name)
	}
	if got := strings.Join(declared, ","); got != "finish,ignore_user,kb_get,kb_search,request_human,start_voice_session" {
		t.Errorf("tools declared in text mode: %s", got)
	}
	if reqs[0].Model != "llama-test" || reqs[0].ToolChoiceString() != "auto" || !reqs[0].IncludeUsage {
		t.Errorf("request: model %q tool_choice %q include_usage %v", reqs[0].Model, reqs[0].ToolChoiceString(), reqs[0].IncludeUsage)
	}
	msgs := reqs[1].Messages
	asst, tool := msgs[len(msgs)-2], msgs[len(msgs)-1]
	if len(asst.ToolCalls) != 1 || asst.ToolCalls[0].ID != "call_kb1" || tool.Role != "tool" || tool.ToolCallID != "call_kb1" {
		t.Fatalf("second request ends with %+v / %+v, want the call and its result under the model's id", asst, tool)
	}
	var resp struct {
		Output struct {
			Results []map[string]any `json:"results"`
		} `json:"output"`
	}
	if err := json.Unmarshal([]byte(tool.Content), &resp); err != nil || len(resp.Output.Results) == 0 {
		t.Errorf("tool message = %s (%v), want kb_search results", tool.Content, err)
	}
}

func TestOpenAIProviderModelErrorsEndTheTurnHonestly(t *testing.T) {
	cases := []struct {
		name      string
		reply     fakeopenai.Reply
		code      string
		retryable bool
	}{
		{"rate limited", fakeopenai.ErrorReply(429, "requests", "rate_limit_exceeded", "slow down"), "model_error", true},
		{"bad request", fakeopenai.ErrorReply(400, "invalid_request_error", "", "bad"), "model_error", false},
		{"cut off at the token limit", fakeopenai.Reply{Chunks: []fakeopenai.Chunk{{Text: "The answer"}, {FinishReason: "length"}}},
			"model_truncated", true},
		{"stream dropped", fakeopenai.Reply{Chunks: []fakeopenai.Chunk{{Text: "The answer"}}, Cut: true}, "model_truncated", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			brain := fakeopenai.NewScript(fakeopenai.Fixed(tc.reply), fakeopenai.Fixed(fakeopenai.TextReply("fine now", 1)))
			g := startGateway(t, openAIConfig(t, brain), nil)
			c := g.dial("", nil)
			c.start(nil)
			evs := c.ask("first question")
			errs := ofType(evs, "error")
			if len(errs) != 1 || errs[0].str("code") != tc.code || errs[0]["retryable"] != tc.retryable {
				t.Fatalf("errors = %v, want one %s retryable=%v", errs, tc.code, tc.retryable)
			}
			if len(ofType(evs, "text.done")) != 0 || last(evs).str("reason") != "error" {
				t.Fatalf("a failed turn ended with %v", evs)
			}
			if evs := c.ask("second question"); last(evs).str("reason") != "end_turn" {
				t.Fatalf("second turn: %v", evs)
			}
		})
	}
}

func TestOpenAIOfflineDemoAnswersFromKnowledgeBase(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("OPENAI_API_KEY", "")
	cfg := defaultTestConfig(t)
	cfg.TextProvider = "openai"
	g := startGateway(t, cfg, nil)
	c := g.dial("", nil)
	ready := c.start(nil)
	if model, _ := ready["model"].(map[string]any); model["offline"] != true || model["name"] != "gpt-4o-mini" || ready.str("notice") == "" {
		t.Fatalf("session.ready does not say the model is the offline demo: %v", ready)
	}
	evs := c.ask("How do I return a bag of coffee?")
	calls := ofType(evs, "tool.call")
	if len(calls) != 2 || calls[0].str("name") != "kb_search" || calls[1].str("name") != "kb_get" ||
		!strings.HasPrefix(calls[0].str("id"), "call_") {
		t.Fatalf("calls = %v, want kb_search then kb_get with OpenAI-style ids", calls)
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
}

func TestOpenAIProviderCarriesTheConversationAcrossVoiceAndBack(t *testing.T) {
	text := fakeopenai.NewScript(
		fakeopenai.Fixed(fakeopenai.CallReply(fakeopenai.Call{ID: "call_s", Name: "kb_search", Args: `{"query":"shipping"}`})),
		fakeopenai.Fixed(fakeopenai.TextReply("Beans ship in two days.", 2)),
		fakeopenai.Fixed(fakeopenai.TextReply("You're welcome.", 1)),
	)
	script := fakegemini.NewLiveScript()
	g := startGatewayWith(t, openAIConfig(t, text), brains{live: script})
	c := g.dial("", nil)
	c.start(nil)
	c.ask("How fast do you ship?")

	c.send(map[string]any{"type": "voice.start"})
	if ev := c.next(); ev.typ() != "mode" || ev.str("mode") != "voice" {
		t.Fatalf("after voice.start: %v", ev)
	}
	u := nextUpstream(t, script)
	testwait.For(t, "the text history upstream", func() bool { return len(u.ofKind(fakegemini.EventClientContent)) == 1 })
	seed := strings.Join(contentTexts(u.ofKind(fakegemini.EventClientContent)[0]), "|")
	if !strings.Contains(seed, "user:How fast do you ship?") || !strings.Contains(seed, "model:Beans ship in two days.") {
		t.Fatalf("voice seeded with %q, want the text turn", seed)
	}
	must(t, u.SendInputTranscript("And to Canada?"))
	must(t, u.SendOutputTranscript("Canada takes a week."))
	must(t, u.SendAudio(pcm(1, 4800)))
	must(t, u.SendTurnComplete(nil))
	c.recvUntil("turn.done")

	c.send(map[string]any{"type": "voice.stop"})
	if ev := c.next(); ev.typ() != "mode" || ev.str("mode") != "text" {
		t.Fatalf("after voice.stop: %v", ev)
	}
	u.waitEnded()
	if end := last(c.ask("Thanks!")); end.str("reason") != "end_turn" {
		t.Fatalf("text turn after voice: %v", end)
	}
	var said []string
	for _, m := range text.Requests()[2].Messages {
		switch {
		case m.Role == "system":
		case len(m.ToolCalls) > 0:
			said = append(said, "assistant:call "+m.ToolCalls[0].ID)
		case m.Role == "tool":
			said = append(said, "tool:"+m.ToolCallID)
		default:
			said = append(said, m.Role+":"+string(m.Content))
		}
	}
	want := "user:How fast do you ship?|assistant:call call_s|tool:call_s|assistant:Beans ship in two days.|" +
		"user:And to Canada?|assistant:Canada takes a week.|user:Thanks!"
	if got := strings.Join(said, "|"); got != want {
		t.Fatalf("the OpenAI model saw %q, want %q", got, want)
	}
}

func indexOf(evs []event, typ string) int {
	for i, e := range evs {
		if e.typ() == typ {
			return i
		}
	}
	return -1
}

// Arguments that do not parse are fed back to the model as that call's
// tool message, never run, and the turn goes on.
func TestOpenAICallWithInvalidJSONArgumentsIsFedBackNotRun(t *testing.T) {
	brain := fakeopenai.NewScript(
		fakeopenai.Fixed(fakeopenai.CallReply(fakeopenai.Call{ID: "call_bad", Name: "kb_get",
			Pieces: []string{`{"id": "shipp`, `ing"`}})),
		fakeopenai.Fixed(fakeopenai.TextReply("Sorry, let me try that again later.", 2)),
	)
	g := startGateway(t, openAIConfig(t, brain), nil)
	c := g.dial("", nil)
	c.start(nil)
	evs := c.ask("Shipping?")
	r := resultsByID(evs)["call_bad"]
	e, _ := r["error"].(map[string]any)
	if r["ok"] != false || e["type"] != "VALIDATION" || e["code"] != "invalid_json" {
		t.Fatalf("tool.result %v, want VALIDATION invalid_json", r)
	}
	if len(ofType(evs, "tool.args")) != 0 {
		t.Errorf("unreadable arguments were shown: %v", ofType(evs, "tool.args"))
	}
	msgs := brain.Requests()[1].Messages
	tool := msgs[len(msgs)-1]
	if tool.Role != "tool" || tool.ToolCallID != "call_bad" || !strings.Contains(string(tool.Content), `"invalid_json"`) ||
		!strings.Contains(string(tool.Content), "Invalid tool arguments JSON") || strings.Contains(string(tool.Content), "shipp") {
		t.Fatalf("tool message %+v, want the invalid_json error under the call's id, without the arguments", tool)
	}
	if end := last(evs); end.str("reason") != "end_turn" {
		t.Fatalf("turn.done %v, want the turn to go on to an answer", end)
	}
}

func TestOpenAIContentFilterIsModelRefusedAndTokensAreCounted(t *testing.T) {
	answer := fakeopenai.TextReply("Fine.", 1)
	answer.Usage = &fakeopenai.Usage{PromptTokens: 120, CompletionTokens: 7}
	brain := fakeopenai.NewScript(
		fakeopenai.Fixed(fakeopenai.Reply{Chunks: []fakeopenai.Chunk{{Text: "I can"}, {FinishReason: "content_filter"}}}),
		fakeopenai.Fixed(answer),
	)
	g := startGateway(t, openAIConfig(t, brain), nil)
	c := g.dial("", nil)
	c.start(nil)
	evs := c.ask("something it will not answer")
	errs := ofType(evs, "error")
	if len(errs) != 1 || errs[0].str("code") != "model_refused" || errs[0]["retryable"] != false {
		t.Fatalf("errors %v, want one non-retryable model_refused", errs)
	}
	if end := last(evs); end.str("reason") != "error" {
		t.Fatalf("turn.done %v, want error", end)
	}
	c.ask("something else")
	if in, out := testutil.ToFloat64(g.gw.sessions.Metrics.ModelTokens.WithLabelValues("openai", "text", "input", "text", "browser")),
		testutil.ToFloat64(g.gw.sessions.Metrics.ModelTokens.WithLabelValues("openai", "text", "output", "text", "browser")); in != 120 || out != 7 {
		t.Errorf("tokens counted %v in, %v out; want 120 and 7", in, out)
	}
}
