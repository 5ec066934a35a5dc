package gateway_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/clock"
)

// End-to-end tests of confirmations: a tool the policy says needs the
// user's approval never runs on the model's first call; the browser is
// asked, and the answer reaches the model in a turn of its own.

const confirmKBGet = "tools:\n  kb_get:\n    requiresConfirmation: true\n"

// askForConfirmation runs a turn in which the model calls kb_get{shipping}
// and checks that the call is refused and the user asked; it returns the
// confirm.request.
func askForConfirmation(t *testing.T, c *wsClient) event {
	t.Helper()
	evs := c.ask("read me the shipping article")
	res := ofType(evs, "tool.result")
	if len(res) != 1 || !refusedWith(res[0], "CONFIRMATION_REQUIRED") {
		t.Fatalf("first kb_get: %v, want refused CONFIRMATION_REQUIRED", res)
	}
	reqs := ofType(evs, "confirm.request")
	if len(reqs) != 1 {
		t.Fatalf("%d confirm.request events, want 1: %v", len(reqs), evs)
	}
	req := reqs[0]
	args, _ := req["args"].(map[string]any)
	if req.str("token") == "" || req.str("tool") != "kb_get" || args["id"] != "shipping" || req["turn"] != res[0]["turn"] {
		t.Fatalf("confirm.request = %v", req)
	}
	exp, err := time.Parse(time.RFC3339, req.str("expiresAt"))
	if err != nil || !exp.After(time.Now().Add(-time.Second)) {
		t.Fatalf("confirm.request expiresAt %q: %v", req.str("expiresAt"), err)
	}
	if last(evs).str("reason") != "end_turn" {
		t.Fatalf("turn.done = %v", last(evs))
	}
	return req
}

func confirm(c *wsClient, token string, approve bool) {
	c.send(map[string]any{"type": "confirm", "token": token, "approve": approve})
}

// confirmationTurn reads confirm.done and the turn the answer starts.
func confirmationTurn(t *testing.T, c *wsClient, token, outcome string) []event {
	t.Helper()
	done := c.next()
	if done.typ() != "confirm.done" || done.str("token") != token || done.str("tool") != "kb_get" ||
		done.str("outcome") != outcome {
		t.Fatalf("answer to confirm: %v, want confirm.done %s", done, outcome)
	}
	evs := c.until("turn.done")
	if start := evs[0]; start.typ() != "turn.start" || start.str("kind") != "confirmation" || start.str("text") == "" {
		t.Fatalf("the confirmation's turn starts with %v", start)
	}
	return evs
}

// lastUserText is the text of the last user content of a model request.
func lastUserText(req *fakegemini.Request) string {
	for i := len(req.Contents) - 1; i >= 0; i-- {
		if ct := req.Contents[i]; ct.Role == "user" && len(ct.Parts) > 0 && ct.Parts[0].Text != "" {
			return ct.Parts[0].Text
		}
	}
	return ""
}

func TestApprovedCallRunsWhenTheModelCallsAgain(t *testing.T) {
	brain := fakegemini.NewScript(
		callStep(getCall("shipping")), textStep("I need your approval first."),
		// The approval covers kb_get{shipping} only, not other arguments.
		callStep(getCall("returns-and-refunds"), getCall("shipping")), textStep("Shipping takes two days."),
	)
	g := startGateway(t, withPolicy(t, defaultTestConfig(t), confirmKBGet), brain)
	c := g.dial("", nil)
	c.start(nil)
	token := askForConfirmation(t, c).str("token")
	// The model was told why, with the token, and the tool did not run.
	if typ, msg := responseError(lastResponses(t, brain.Requests()[1])[0]); typ != "CONFIRMATION_REQUIRED" ||
		!strings.Contains(msg, token) {
		t.Fatalf("model told %s %q", typ, msg)
	}

	confirm(c, token, true)
	evs := confirmationTurn(t, c, token, "approved")
	if evs[0]["turn"] != float64(2) {
		t.Fatalf("confirmation turn = %v, want turn 2", evs[0])
	}
	results := resultsInCallOrder(evs)
	if r := results[0]; !refusedWith(r, "CONFIRMATION_REQUIRED") {
		t.Fatalf("kb_get with other arguments after the approval: %v", r)
	}
	if r := results[1]; r["ok"] != true || r["refused"] == true {
		t.Fatalf("approved kb_get: %v", r)
	}
	if again := ofType(evs, "confirm.request"); len(again) != 1 || again[0]["args"].(map[string]any)["id"] != "returns-and-refunds" {
		t.Fatalf("confirm.request for the other arguments: %v", again)
	}
	if done := ofType(evs, "text.done"); len(done) != 1 || done[0].str("text") != "Shipping takes two days." {
		t.Fatalf("text.done = %v", done)
	}
	reqs := brain.Requests()
	if said := lastUserText(reqs[2]); !strings.Contains(said, "approved") || !strings.Contains(said, "kb_get") {
		t.Fatalf("model was told %q, want the approval of kb_get", said)
	}
	out, _ := lastResponses(t, reqs[3])[1].Response["output"].(map[string]any)
	if out["id"] != "shipping" {
		t.Fatalf("approved kb_get answered %v", lastResponses(t, reqs[3])[1].Response)
	}

	// The token is single-use, and made-up tokens are unknown too.
	for _, tok := range []string{token, "c_madeup"} {
		confirm(c, tok, true)
		if ev := c.next(); ev.typ() != "error" || ev.str("code") != "confirmation_unknown" || ev["retryable"] != false {
			t.Fatalf("confirm %s again: %v, want error confirmation_unknown", tok, ev)
		}
	}
	if brain.Remaining() != 0 || len(brain.Requests()) != 4 {
		t.Fatalf("a reused token reached the model: %d requests", len(brain.Requests()))
	}
}

func TestDeniedCallNeverRuns(t *testing.T) {
	brain := fakegemini.NewScript(
		callStep(getCall("shipping")), textStep("I need your approval first."),
		callStep(getCall("shipping")), textStep("Understood, I did not open it."),
	)
	g := startGateway(t, withPolicy(t, defaultTestConfig(t), confirmKBGet), brain)
	c := g.dial("", nil)
	c.start(nil)
	token := askForConfirmation(t, c).str("token")

	confirm(c, token, false)
	evs := confirmationTurn(t, c, token, "denied")
	if said := lastUserText(brain.Requests()[2]); !strings.Contains(said, "declined") {
		t.Fatalf("model was told %q, want the refusal", said)
	}
	// The model calls again anyway: it is refused again, and asked anew.
	res := ofType(evs, "tool.result")
	if len(res) != 1 || !refusedWith(res[0], "CONFIRMATION_REQUIRED") {
		t.Fatalf("kb_get after a denial: %v", res)
	}
	if again := ofType(evs, "confirm.request"); len(again) != 1 || again[0].str("token") == token {
		t.Fatalf("confirm.request after a denial: %v", again)
	}
	if n := testutil.ToFloat64(g.gw.sessions.Metrics.ToolCalls.WithLabelValues("kb_get", "ok", "browser")); n != 0 {
		t.Fatalf("kb_get ran %v times", n)
	}
}

func TestLateConfirmationIsExpiredAndTheCallNeverRuns(t *testing.T) {
	cfg := withPolicy(t, defaultTestConfig(t), confirmKBGet)
	cfg.ConfirmTTL = time.Second
	clk := clock.NewFake(time.Now())
	cfg.Clock = clk
	brain := fakegemini.NewScript(callStep(getCall("shipping")), textStep("I need your approval first."))
	g := startGateway(t, cfg, brain)
	c := g.dial("", nil)
	c.start(nil)
	req := askForConfirmation(t, c)
	exp, _ := time.Parse(time.RFC3339, req.str("expiresAt"))
	clk.Set(exp.Add(100 * time.Millisecond)) // the user is too slow

	confirm(c, req.str("token"), true)
	if ev := c.next(); ev.typ() != "error" || ev.str("code") != "confirmation_expired" || ev["retryable"] != false {
		t.Fatalf("late confirm: %v, want error confirmation_expired", ev)
	}
	if ev := c.next(); ev.typ() != "confirm.done" || ev.str("outcome") != "expired" {
		t.Fatalf("late confirm: %v, want confirm.done expired", ev)
	}
	c.send(map[string]any{"type": "ping"})
	if ev := c.next(); ev.typ() != "pong" {
		t.Fatalf("a late confirmation started something: %v", ev)
	}
	if n := len(brain.Requests()); n != 2 {
		t.Fatalf("model called %d times, want 2", n)
	}
}

func TestPendingConfirmationSurvivesReconnect(t *testing.T) {
	brain := fakegemini.NewScript(
		callStep(getCall("shipping")), textStep("I need your approval first."),
		callStep(getCall("shipping")), textStep("Shipping takes two days."),
	)
	g := startGateway(t, withPolicy(t, defaultTestConfig(t), confirmKBGet), brain)
	c := g.dial("", nil)
	ready := c.start(nil)
	req := askForConfirmation(t, c)
	_ = c.c.CloseNow() // the browser tab reloads

	c2 := g.dial("", nil)
	again := c2.start(map[string]any{"resume": map[string]any{
		"sessionId": ready.str("sessionId"), "resumeToken": ready.str("resumeToken")}})
	pending, _ := again["pendingConfirmations"].([]any)
	if len(pending) != 1 {
		t.Fatalf("pendingConfirmations on resume = %v", again["pendingConfirmations"])
	}
	p, _ := pending[0].(map[string]any)
	if p["token"] != req.str("token") || p["tool"] != "kb_get" || p["expiresAt"] != req.str("expiresAt") {
		t.Fatalf("pending confirmation %v, want %v", p, req)
	}

	confirm(c2, req.str("token"), true)
	evs := confirmationTurn(t, c2, req.str("token"), "approved")
	if res := ofType(evs, "tool.result"); len(res) != 1 || res[0]["ok"] != true {
		t.Fatalf("approved kb_get after reconnect: %v", res)
	}
}

func TestAnotherUsersConfirmationTokenIsUnknownToThem(t *testing.T) {
	cfg := withPolicy(t, defaultTestConfig(t), confirmKBGet)
	cfg.AuthSecret = gateway.Secret(strings.Repeat("k", 32))
	brain := fakegemini.NewScript(
		callStep(getCall("shipping")), textStep("I need your approval first."),
		callStep(getCall("shipping")), textStep("Shipping takes two days."),
	)
	g := startGateway(t, cfg, brain)
	alice := g.dial("", bearer(t, cfg, "alice"))
	alice.start(nil)
	token := askForConfirmation(t, alice).str("token")

	mallory := g.dial("", bearer(t, cfg, "mallory"))
	mallory.start(nil)
	confirm(mallory, token, true)
	if ev := mallory.next(); ev.typ() != "error" || ev.str("code") != "confirmation_unknown" {
		t.Fatalf("another user's token: %v, want error confirmation_unknown", ev)
	}
	// Her attempt neither approved nor used up alice's confirmation.
	confirm(alice, token, true)
	evs := confirmationTurn(t, alice, token, "approved")
	if res := ofType(evs, "tool.result"); len(res) != 1 || res[0]["ok"] != true {
		t.Fatalf("alice's approved kb_get: %v", res)
	}
}

// TestSessionReadyListsToolsAsThePolicySetsThem: the tool list a browser
// gets is the one the orchestrator enforces, policy overrides included.
func TestSessionReadyListsToolsAsThePolicySetsThem(t *testing.T) {
	cfg := withPolicy(t, defaultTestConfig(t), confirmKBGet+"  kb_search:\n    modes: [text]\n")
	g := startGateway(t, cfg, fakegemini.NewScript())
	ready := g.dial("", nil).start(nil)
	tools := map[string]map[string]any{}
	list, _ := ready["tools"].([]any)
	for _, v := range list {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		tools[name] = m
	}
	if tools["kb_get"]["requiresConfirmation"] != true {
		t.Errorf("kb_get listed as %v, want requiresConfirmation true (the policy's)", tools["kb_get"])
	}
	if tools["kb_search"]["requiresConfirmation"] != false {
		t.Errorf("kb_search listed as %v, want requiresConfirmation false", tools["kb_search"])
	}
	if modes, _ := tools["kb_search"]["modes"].([]any); len(modes) != 1 || modes[0] != "text" {
		t.Errorf("kb_search modes %v, want [text] (the policy's)", tools["kb_search"]["modes"])
	}
}

// badGetCall is a kb_get call whose arguments break its schema (id must be
// a string).
func badGetCall() fakegemini.Call {
	return fakegemini.Call{Name: "kb_get", Args: map[string]any{"id": 42}}
}

// The user is never asked to approve a call that could not run: arguments
// are validated before a confirmation is requested.
func TestInvalidArgumentsAreRefusedWithoutAskingForApproval(t *testing.T) {
	brain := fakegemini.NewScript(callStep(badGetCall()), textStep("That id was wrong."))
	g := startGateway(t, withPolicy(t, defaultTestConfig(t), confirmKBGet), brain)
	c := g.dial("", nil)
	c.start(nil)
	evs := c.ask("read me article 42")
	res := ofType(evs, "tool.result")
	if len(res) != 1 || !refusedWith(res[0], "VALIDATION") {
		t.Fatalf("kb_get with invalid arguments: %v, want refused VALIDATION", res)
	}
	if reqs := ofType(evs, "confirm.request"); len(reqs) != 0 {
		t.Fatalf("the user is asked to approve a call with invalid arguments: %v", reqs)
	}
	if typ, _ := responseError(lastResponses(t, brain.Requests()[1])[0]); typ != "VALIDATION" {
		t.Fatalf("model told %s, want VALIDATION", typ)
	}
}

func TestInvalidArgumentsAreRefusedWithoutAskingForApprovalInVoice(t *testing.T) {
	g, script := startVoiceGateway(t, withPolicy(t, defaultTestConfig(t), confirmKBGet), nil)
	c, _, u := startInVoice(t, g, script)
	ids, err := u.SendToolCall(badGetCall())
	must(t, err)
	evs := untilResult(c, ids[0])
	if r := last(evs); !refusedWith(r, "VALIDATION") {
		t.Fatalf("kb_get with invalid arguments: %v, want refused VALIDATION", r)
	}
	if typ, _ := responseError(u.waitResponses(1)[0]); typ != "VALIDATION" {
		t.Fatalf("model told %s, want VALIDATION", typ)
	}
	must(t, u.SendTurnComplete(nil))
	evs = append(evs, c.until("turn.done")...)
	if reqs := ofType(evs, "confirm.request"); len(reqs) != 0 {
		t.Fatalf("the user is asked to approve a call with invalid arguments: %v", reqs)
	}
}
