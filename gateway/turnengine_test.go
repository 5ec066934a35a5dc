package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/transport"
)

// One turn engine: voice is governed exactly like text. End-to-end tests
// through the browser protocol, the real gateway and the fake Live model
// (in strict mode) played by the test.

// testTool builds a test-only tool for both modes; runs counts its runs.
func testTool(t testing.TB, name string, runs *atomic.Int64, edit func(*tools.Manifest),
	h func(ctx context.Context, c tools.Call) tools.Envelope) *tools.Tool {
	t.Helper()
	m := tools.Manifest{Name: name, Category: tools.CategoryAction, Modes: []protocol.Mode{"text", "voice"},
		Description: "A test tool.", Redact: tools.Redact{Args: []string{}, Result: []string{}},
		Parameters: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"integer"}}}`)}
	if edit != nil {
		edit(&m)
	}
	tool, err := tools.NewTool(tools.Spec{Manifest: m, Handler: tools.HandlerFunc(func(ctx context.Context, c tools.Call) tools.Envelope {
		if runs != nil {
			runs.Add(1)
		}
		return h(ctx, c)
	})})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func okTool(data any, ins ...intents.Intent) func(context.Context, tools.Call) tools.Envelope {
	return func(context.Context, tools.Call) tools.Envelope { return tools.OK(data, ins...) }
}

// startVoiceWithTools is startVoiceGateway with test-only tools.
func startVoiceWithTools(t *testing.T, cfg gateway.Config, text fakegemini.Brain, ts ...*tools.Tool) (*testGateway, *fakegemini.LiveScript) {
	t.Helper()
	script := fakegemini.NewLiveScript()
	if text == nil {
		text = fakegemini.NewScript()
	}
	return startGatewayWith(t, cfg, brains{text: text, live: script, tools: ts}), script
}

// Approving a confirmation raised in voice tells the Live model (never the
// text model), as a user turn; its repeated call then runs, once.
func TestVoiceConfirmationIsAnsweredToTheLiveModelAndTheApprovedCallRuns(t *testing.T) {
	var runs atomic.Int64
	transfer := testTool(t, "transfer", &runs, func(m *tools.Manifest) { m.RequiresConfirmation = true },
		okTool(map[string]any{"done": true}))
	text := fakegemini.NewScript()
	g, script := startVoiceWithTools(t, defaultTestConfig(t), text, transfer)
	c, _, u := startInVoice(t, g, script)

	args := map[string]any{"amount": 25}
	_, err := u.SendToolCall(fakegemini.Call{ID: "t1", Name: "transfer", Args: args})
	must(t, err)
	req := c.until("confirm.request")
	resp := u.waitResponses(1)
	if e, _ := resp[0].Response["error"].(map[string]any); e["type"] != "CONFIRMATION_REQUIRED" {
		t.Fatalf("first answer %v, want CONFIRMATION_REQUIRED", resp[0].Response)
	}
	must(t, u.SendTurnComplete(nil))
	c.until("turn.done")

	c.send(map[string]any{"type": "confirm", "token": last(req).str("token"), "approve": true})
	c.until("confirm.done")
	testwait.For(t, "the outcome upstream", func() bool { return len(u.ofKind(fakegemini.EventClientContent)) == 1 })
	note := u.ofKind(fakegemini.EventClientContent)[0]
	if !note.TurnComplete || !strings.Contains(strings.Join(contentTexts(note), " "), "approved") {
		t.Fatalf("the Live model got %+v, want the approval as a complete user turn", note)
	}
	if len(text.Requests()) != 0 {
		t.Fatalf("the text model was asked %d times; the Live model made the call", len(text.Requests()))
	}
	// The model calls again with the same arguments: it runs, once.
	_, err = u.SendToolCall(fakegemini.Call{ID: "t2", Name: "transfer", Args: args})
	must(t, err)
	resp = u.waitResponses(2)
	if resp[1].Response["ok"] != true || runs.Load() != 1 {
		t.Fatalf("approved call: %v, ran %d times; want it run once", resp[1].Response, runs.Load())
	}
}

func TestVoiceDeniedConfirmationNeverRuns(t *testing.T) {
	var runs atomic.Int64
	transfer := testTool(t, "transfer", &runs, func(m *tools.Manifest) { m.RequiresConfirmation = true },
		okTool("done"))
	g, script := startVoiceWithTools(t, defaultTestConfig(t), nil, transfer)
	c, _, u := startInVoice(t, g, script)
	_, err := u.SendToolCall(fakegemini.Call{ID: "t1", Name: "transfer", Args: map[string]any{"amount": 1}})
	must(t, err)
	req := c.until("confirm.request")
	must(t, u.SendTurnComplete(nil))
	c.until("turn.done")
	c.send(map[string]any{"type": "confirm", "token": last(req).str("token"), "approve": false})
	c.until("confirm.done")
	testwait.For(t, "the outcome upstream", func() bool { return len(u.ofKind(fakegemini.EventClientContent)) == 1 })
	if !strings.Contains(strings.Join(contentTexts(u.ofKind(fakegemini.EventClientContent)[0]), " "), "declined") {
		t.Fatal("the Live model was not told the user declined")
	}
	_, err = u.SendToolCall(fakegemini.Call{ID: "t2", Name: "transfer", Args: map[string]any{"amount": 1}})
	must(t, err)
	resp := u.waitResponses(2)
	if e, _ := resp[1].Response["error"].(map[string]any); e["type"] != "CONFIRMATION_REQUIRED" || runs.Load() != 0 {
		t.Fatalf("after a denial: %v, ran %d times; want a new confirmation, never run", resp[1].Response, runs.Load())
	}
}

// ignore_user in voice: from that moment nothing reaches the model; the
// browser gets blocked, then mode text (blocked), the Live connection
// closes, and typed text is refused.
func TestBlockInVoiceEndsVoiceAtOnce(t *testing.T) {
	g, script := startVoiceGateway(t, defaultTestConfig(t), nil)
	c, _, u := startInVoice(t, g, script)
	_, err := u.SendToolCall(fakegemini.Call{ID: "b1", Name: "ignore_user",
		Args: map[string]any{"duration_seconds": 60, "reason": "abuse"}})
	must(t, err)
	if ev := c.until("blocked"); last(ev).str("until") == "" {
		t.Fatalf("blocked %v", last(ev))
	}
	if ev := last(c.until("mode")); ev.str("mode") != "text" || ev.str("reason") != "blocked" {
		t.Fatalf("mode %v, want text (blocked)", ev)
	}
	u.waitEnded()
	c.send(map[string]any{"type": "text", "text": "let me back in"})
	if ev := last(c.until("error")); ev.str("code") != "blocked" {
		t.Fatalf("typed text after the block: %v, want error blocked", ev)
	}
	noUpstream(t, script)
}

// A block set by the same user's session on another node reaches a running
// voice session at once (every node is told), not at its next turn's end:
// nothing more the user says reaches the model.
func TestBlockFromAnotherNodeEndsVoiceAtOnce(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + redistest.Start(t))
	gA, script := startVoiceGateway(t, cfg, nil)
	gB := startGateway(t, cfg, fakegemini.NewScript(callStep(fakegemini.Call{Name: "ignore_user",
		Args: map[string]any{"duration_seconds": 60, "reason": "spam"}}), textStep("Blocked.")))
	c, _, u := startInVoice(t, gA, script)
	other := gB.dial("", nil)
	other.start(nil)
	other.ask("block me")

	c.until("blocked")
	if ev := last(c.until("mode")); ev.str("mode") != "text" || ev.str("reason") != "blocked" {
		t.Fatalf("mode %v, want text (blocked)", ev)
	}
	u.waitEnded()
}

// The voice soft latency budget (800 ms) holds even when the tool's
// manifest asks for more: only the policy file can loosen it.
func TestVoiceLatencyBudgetIsNotLoosenedByTheManifest(t *testing.T) {
	slow := testTool(t, "slow_search", nil, func(m *tools.Manifest) {
		m.Category = tools.CategoryRetrieval
		m.SoftLatencyMs = tools.LatencyMs{Text: 2000, Voice: 2000}
	}, func(ctx context.Context, _ tools.Call) tools.Envelope {
		select {
		case <-time.After(900 * time.Millisecond):
		case <-ctx.Done():
		}
		return tools.OK(map[string]any{"results": []any{"x"}})
	})
	g, script := startVoiceWithTools(t, defaultTestConfig(t), nil, slow)
	_, _, u := startInVoice(t, g, script)
	_, err := u.SendToolCall(fakegemini.Call{ID: "s1", Name: "slow_search", Args: map[string]any{}})
	must(t, err)
	u.waitResponses(1)
	if got := testutil.ToFloat64(g.gw.sessions.Metrics.SoftLatencyExceeded.WithLabelValues("slow_search", "voice")); got != 1 {
		t.Fatalf("a 900 ms voice call over its 800 ms budget was counted %v times, want 1", got)
	}
}

// Once a terminal tool's result is in, nothing more of the turn reaches
// the browser; its text is the answer and turn.done says terminal_tool at
// the turn's end.
func TestTerminalToolInVoiceIsTheAnswerAndQuietsTheRestOfTheTurn(t *testing.T) {
	hangUp := testTool(t, "hang_up", nil, func(m *tools.Manifest) { m.Terminal = true }, okTool("Goodbye!"))
	g, script := startVoiceWithTools(t, defaultTestConfig(t), nil, hangUp)
	c, _, u := startInVoice(t, g, script)
	_, err := u.SendToolCall(fakegemini.Call{ID: "h1", Name: "hang_up", Args: map[string]any{}})
	must(t, err)
	if ev := last(c.until("text.done")); ev.str("text") != "Goodbye!" {
		t.Fatalf("text.done %v", ev)
	}
	if resp := u.waitResponses(1)[0].Response; resp["instruction"] == nil {
		t.Fatalf("the model was not told the text is final: %v", resp)
	}
	must(t, u.SendAudio(pcm(1, 960)))
	must(t, u.SendOutputTranscript("and another thing"))
	must(t, u.SendTurnComplete(nil))
	fs := c.recvUntil("turn.done")
	if len(audioOf(fs)) != 0 || len(ofType(events(fs), "transcript.output")) != 0 {
		t.Fatalf("after the terminal result the browser got %d bytes of audio and %v",
			len(audioOf(fs)), ofType(events(fs), "transcript.output"))
	}
	if end := last(events(fs)); end.str("reason") != "terminal_tool" {
		t.Fatalf("turn.done %v, want terminal_tool", end)
	}
}

// A terminal tool and a mode switch in one turn: the switch wins, and the
// model gets the tool's plain result.
func TestTerminalToolWithAModeSwitchInVoiceLetsTheSwitchWin(t *testing.T) {
	hangUp := testTool(t, "hang_up", nil, func(m *tools.Manifest) { m.Terminal = true }, okTool("Goodbye!"))
	g, script := startVoiceWithTools(t, defaultTestConfig(t), nil, hangUp)
	c, _, u := startInVoice(t, g, script)
	_, err := u.SendToolCall(fakegemini.Call{ID: "e1", Name: "end_voice_session", Args: map[string]any{}},
		fakegemini.Call{ID: "h1", Name: "hang_up", Args: map[string]any{}})
	must(t, err)
	for _, r := range u.waitResponses(2) {
		if r.Response["instruction"] != nil {
			t.Fatalf("%s carries the terminal instruction although the mode switch wins", r.ID)
		}
	}
	must(t, u.SendTurnComplete(nil))
	evs := c.until("mode")
	if len(ofType(evs, "text.done")) != 0 || last(evs).str("mode") != "text" {
		t.Fatalf("events %v, want the switch to text and no terminal answer", evs)
	}
}

// The real service can send audio → toolCall → audio → generationComplete
// → turnComplete before the client answers the call. The call is still
// answered, its tool.result belongs to its turn, and that turn's turn.done
// waits for it.
func TestVoiceCallAnsweredAfterTurnCompleteBelongsToItsTurn(t *testing.T) {
	release := make(chan struct{})
	slow := testTool(t, "lookup", nil, nil, func(ctx context.Context, _ tools.Call) tools.Envelope {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return tools.OK(map[string]any{"answer": 42})
	})
	g, script := startVoiceWithTools(t, defaultTestConfig(t), nil, slow)
	c, _, u := startInVoice(t, g, script)
	// turnComplete carries the turn's usage, which the gateway reads after
	// the turnComplete itself: once the usage shows on /metrics, the turn is
	// complete on the gateway's side, and the call still runs.
	ids, err := u.CallMidTurn(t.Context(), fakegemini.Tone(200*time.Millisecond),
		[]fakegemini.Call{{Name: "lookup", Args: map[string]any{}}}, fakegemini.Tone(200*time.Millisecond),
		&genai.UsageMetadata{ResponseTokenCount: 7})
	must(t, err)
	fs := c.recvUntil("tool.call")
	testwait.For(t, "the gateway to read turnComplete", func() bool {
		return selected(t, scrapeSamples(t, g.adminURL+"/metrics"), pqSelector{name: "turnstile_model_tokens_total",
			matchers: []pqMatcher{{"mode", "=", "voice"}, {"kind", "=", "output"}}}) == 7
	})
	close(release)
	fs = append(fs, c.recvUntil("turn.done")...)
	res := ofType(events(fs), "tool.result")
	if len(res) != 1 || res[0]["turn"] != 1.0 || res[0].str("id") != ids[0] {
		t.Fatalf("tool.result %v, want the call's result in turn 1", res)
	}
	if resp := u.waitResponses(1); resp[0].ID != ids[0] || resp[0].Response["ok"] != true {
		t.Fatalf("the model got %v, want the call answered", resp[0])
	}
}

// The newest resumable handle is stored when it arrives, so a browser that
// drops before any voice turn completed resumes its Live session.
func TestVoiceResumeUsesTheHandleOfAnUnfinishedTurn(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + redistest.Start(t))
	g, script := startVoiceGateway(t, cfg, nil)
	c, ready, u := startInVoice(t, g, script)
	must(t, u.SendAudio(pcm(1, 960)))
	handle, err := u.SendResumptionUpdate(true)
	must(t, err)
	c.recvAudio(960)
	testwait.For(t, "the handle stored", func() bool {
		rec, _, err := storedSession(t, cfg, ready)
		return err == nil && rec.ResumeHandle == handle
	})
	c.c.CloseNow()
	u.waitEnded()

	c2 := g.dial("", nil)
	c2.start(map[string]any{"resume": map[string]any{"sessionId": ready.str("sessionId"), "resumeToken": ready.str("resumeToken")}})
	u2 := nextUpstream(t, script)
	if got := u2.Setup.ResumeHandle(); got != handle {
		t.Fatalf("the resumed upstream asked for handle %q, want %q", got, handle)
	}
}

// SUPPRESS_AUDIO and SUPPRESS_TRANSCRIPT hide the rest of the turn's audio
// and transcripts, both ways; SET_PENDING_MESSAGE reaches the model at the
// next turn boundary, never mid-answer.
func TestVoiceIntentsTakeEffectEndToEnd(t *testing.T) {
	quiet := testTool(t, "quiet", nil, nil, okTool("ok",
		intents.Intent{Type: intents.SuppressAudio}, intents.Intent{Type: intents.SuppressTranscript}))
	remind := testTool(t, "remind", nil, nil, okTool("ok",
		intents.Intent{Type: intents.SetPendingMessage, Message: "the user prefers short answers"}))
	g, script := startVoiceWithTools(t, defaultTestConfig(t), nil, quiet, remind)
	c, _, u := startInVoice(t, g, script)

	must(t, u.SendInputTranscript("hello"))
	_, err := u.SendToolCall(fakegemini.Call{ID: "q1", Name: "quiet", Args: map[string]any{}},
		fakegemini.Call{ID: "r1", Name: "remind", Args: map[string]any{}})
	must(t, err)
	u.waitResponses(2)
	must(t, u.SendInputTranscript(" there"))
	must(t, u.SendAudio(pcm(2, 960)))
	must(t, u.SendOutputTranscript("secret"))
	if n := len(u.ofKind(fakegemini.EventClientContent)); n != 0 {
		t.Fatalf("%d clientContent mid-answer", n)
	}
	must(t, u.SendTurnComplete(nil))
	fs := c.recvUntil("turn.done")
	evs := events(fs)
	if len(audioOf(fs)) != 0 || len(ofType(evs, "transcript.output")) != 0 || len(ofType(evs, "transcript.input")) != 1 {
		t.Fatalf("audio %d bytes, transcripts %v / %v: want everything after the intents hidden",
			len(audioOf(fs)), ofType(evs, "transcript.input"), ofType(evs, "transcript.output"))
	}
	testwait.For(t, "the pending message", func() bool { return len(u.ofKind(fakegemini.EventClientContent)) == 1 })
	note := u.ofKind(fakegemini.EventClientContent)[0]
	if note.TurnComplete || !strings.Contains(strings.Join(contentTexts(note), " "), "short answers") {
		t.Fatalf("pending message %+v, want it as context at the boundary", note)
	}
}

// The loop check runs before the gates: a third identical call in a voice
// turn (whose retrieval budget is 2) is a loop, not over budget.
func TestVoiceThirdIdenticalSearchIsALoopNotOverBudget(t *testing.T) {
	g, script := startVoiceGateway(t, defaultTestConfig(t), nil)
	c, _, u := startInVoice(t, g, script)
	for i := range 3 {
		_, err := u.SendToolCall(fakegemini.Call{ID: "k" + string(rune('1'+i)), Name: "kb_search",
			Args: map[string]any{"query": "shipping"}})
		must(t, err)
		u.waitResponses(i + 1)
	}
	resp := u.responses()[2]
	if e, _ := resp.Response["error"].(map[string]any); e["type"] != "LOOP_DETECTED" {
		t.Fatalf("third identical search: %v, want LOOP_DETECTED", resp.Response)
	}
	must(t, u.SendTurnComplete(nil))
	c.until("turn.done")
}

// A call ID the session already answered, re-sent after a resume, is
// answered again from the ledger with the same response and not run again
// (nor counted again).
func TestVoiceCallReSentAfterResumeIsAnsweredFromTheLedger(t *testing.T) {
	var runs atomic.Int64
	book := testTool(t, "book", &runs, nil, okTool(map[string]any{"booking": "B-17"}))
	g, script := startVoiceWithTools(t, defaultTestConfig(t), nil, book)
	c, ready, u := startInVoice(t, g, script)
	_, err := u.SendToolCall(fakegemini.Call{ID: "same-id", Name: "book", Args: map[string]any{}})
	must(t, err)
	first := u.waitResponses(1)[0]
	must(t, u.SendTurnComplete(nil))
	c.until("turn.done")
	c.c.CloseNow()
	u.waitEnded()

	c2 := g.dial("", nil)
	c2.start(map[string]any{"resume": map[string]any{"sessionId": ready.str("sessionId"), "resumeToken": ready.str("resumeToken")}})
	u2 := nextUpstream(t, script)
	_, err = u2.SendToolCall(fakegemini.Call{ID: "same-id", Name: "book", Args: map[string]any{}})
	must(t, err)
	again := u2.waitResponses(1)[0]
	if runs.Load() != 1 || mustJSON(t, again.Response) != mustJSON(t, first.Response) {
		t.Fatalf("ran %d times; answered %v then %v; want one run and the same answer", runs.Load(), first.Response, again.Response)
	}
	if got := testutil.ToFloat64(g.gw.sessions.Metrics.ToolCalls.WithLabelValues("book", "ok", "browser")); got != 1 {
		t.Fatalf("tool_calls_total{book,ok} = %v, want 1", got)
	}
}

// The model gets the versioned envelope; the browser gets the allow-listed
// fields of a result.
func TestEnvelopeToTheModelAndResultFieldsToTheBrowser(t *testing.T) {
	weird := testTool(t, "weird", nil, nil, func(context.Context, tools.Call) tools.Envelope {
		return tools.Fail("SOMETHING_ODD", "odd failure", true, true)
	})
	brain := fakegemini.NewScript(callStep(searchCall("shipping"),
		fakegemini.Call{Name: "weird", Args: map[string]any{}}), textStep("done"))
	g := startGatewayWith(t, defaultTestConfig(t), brains{text: brain, tools: []*tools.Tool{weird}})
	c := g.dial("", nil)
	c.start(nil)
	evs := c.ask("shipping?")
	resps := lastResponses(t, brain.Requests()[1])
	if r := resps[0].Response; r["v"] != 1.0 || r["ok"] != true || r["output"] == nil {
		t.Fatalf("success envelope %v, want {v:1, ok:true, output}", r)
	}
	r := resps[1].Response
	e, _ := r["error"].(map[string]any)
	if r["v"] != 1.0 || r["ok"] != false || e["type"] != "INTERNAL" || e["message"] != "odd failure" ||
		r["partialSideEffects"] != true {
		t.Fatalf("failure envelope %v, want {v:1, ok:false, error:{INTERNAL}, partialSideEffects:true}", r)
	}
	res := resultsByID(evs)
	var search event
	for _, ev := range res {
		if ev.str("name") == "kb_search" {
			search = ev
		}
	}
	shown, _ := search["result"].(map[string]any)
	if rs, _ := shown["results"].([]any); len(rs) == 0 {
		t.Fatalf("tool.result %v, want the allow-listed results field", search)
	}
}

// A Gemini 3 model requires the thoughtSignature of its function-call parts
// back unchanged; the gateway keeps it in the history.
func TestThoughtSignaturesAreKeptForTheNextRequest(t *testing.T) {
	brain := fakegemini.RequireThoughtSignatures(fakegemini.NewScript(callStep(searchCall("shipping")), textStep("Three days.")))
	g := startGateway(t, defaultTestConfig(t), brain)
	c := g.dial("", nil)
	c.start(nil)
	if end := last(c.ask("How long is shipping?")); end.str("reason") != "end_turn" {
		t.Fatalf("turn.done %v: the model refused the history", end)
	}
	if brain.Issued() == 0 {
		t.Fatal("the brain issued no signature: the test proves nothing")
	}
}

// A prompt the provider blocks is reported as model_refused.
func TestBlockedPromptIsModelRefused(t *testing.T) {
	g := startGateway(t, defaultTestConfig(t), fakegemini.NewScript(fakegemini.Fixed(fakegemini.BlockedReply("SAFETY"))))
	c := g.dial("", nil)
	c.start(nil)
	evs := c.ask("something blocked")
	errs := ofType(evs, "error")
	if len(errs) != 1 || errs[0].str("code") != "model_refused" || errs[0]["retryable"] != false {
		t.Fatalf("errors %v, want model_refused", errs)
	}
}

// storedSession reads a session from the gateway's Redis without taking it over.
func storedSession(t testing.TB, cfg gateway.Config, ready event) (store.Record, []transport.Entry, error) {
	t.Helper()
	rdb, err := store.NewRedisClient(string(cfg.RedisURL), time.Second) // closed at once: called in polls
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rdb.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// Load, not Resume: reading must not take the session over (a resume
	// would fence the gateway's connection, whose writes then stop).
	return store.NewRedisStore(rdb, store.RedisStoreOptions{}).Load(ctx, ready.str("sessionId"))
}

// A drain lets a running voice turn play out to its turnComplete: the
// user's words reach the history, then the browser is told to reconnect.
func TestDrainLetsARunningVoiceTurnPlayOut(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + redistest.Start(t))
	g, script := startVoiceGateway(t, cfg, nil)
	c, ready, u := startInVoice(t, g, script)
	must(t, u.SendInputTranscript("What time do you open?"))
	must(t, u.SendAudio(pcm(1, 960)))
	c.recvAudio(960)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	drained := make(chan struct{})
	go func() { defer close(drained); g.gw.sessions.Drain(ctx) }()
	// The drain has looked at the connection and waits for its turn,
	// rather than closing it.
	testwait.For(t, "the drain to wait for the running voice turn", func() bool {
		return g.gauge("turnstile_drain_waiting_sessions") == 1
	})
	must(t, u.SendAudio(pcm(2, 960)))
	must(t, u.SendOutputTranscript("We open at nine."))
	c.recvAudio(960)
	must(t, u.SendTurnComplete(nil))
	if code := c.expectClose(); code != 4100 {
		t.Fatalf("closed with %d, want 4100 after the turn", code)
	}
	<-drained
	if n := g.gauge("turnstile_drain_waiting_sessions"); n != 0 {
		t.Fatalf("turnstile_drain_waiting_sessions %v after the drain, want 0", n)
	}
	_, hist, err := storedSession(t, cfg, ready)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, e := range hist {
		texts = append(texts, string(e.Role)+":"+e.Text)
	}
	if got := strings.Join(texts, "|"); got != "user:What time do you open?|model:We open at nine." {
		t.Fatalf("history %s, want the whole turn", got)
	}
}

// A confirmation answered while a text turn runs is not parked until the
// user's next message: its turn starts as soon as the running one ends.
func TestApprovalDuringARunningTurnStartsItsTurnWhenThatEnds(t *testing.T) {
	slow := fakegemini.TextReply("Here is a long answer.", 3)
	for i := range slow.Chunks {
		slow.Chunks[i].Delay = 100 * time.Millisecond
	}
	brain := fakegemini.NewScript(callStep(getCall("shipping")), textStep("I need your approval."),
		fakegemini.Fixed(slow), textStep("Approved, reading it now."))
	g := startGateway(t, withPolicy(t, defaultTestConfig(t), confirmKBGet), brain)
	c := g.dial("", nil)
	c.start(nil)
	req := askForConfirmation(t, c)
	c.send(map[string]any{"type": "text", "text": "tell me something long"})
	c.until("turn.start")
	confirm(c, req.str("token"), true)
	evs := c.until("turn.done") // the running turn ends...
	if len(ofType(evs, "confirm.done")) != 1 {
		t.Fatalf("no confirm.done while the turn ran: %v", evs)
	}
	next := c.until("turn.done") // ...and the confirmation's turn follows by itself
	if start := next[0]; start.typ() != "turn.start" || start.str("kind") != "confirmation" {
		t.Fatalf("after the running turn: %v, want the confirmation's turn", next)
	}
}
