package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
)

// TestConfirmationAnsweredAfterAHandOffStartsNoModelTurn: the model asks
// for approval of kb_get and hands the conversation to a person in the same
// turn; the user's approval, given while the person has it, is answered
// confirm.done then handoff.pending (no turn.start: the model is not asked
// anything), and kept in the history, where the model reads it once an
// operator hands the conversation back.
func TestConfirmationAnsweredAfterAHandOffStartsNoModelTurn(t *testing.T) {
	c, brain := approveWhileHandedOff(t, textStep("Back with you."))
	evs := c.ask("so?")
	if done := ofType(evs, "text.done"); len(done) != 1 || done[0].str("text") != "Back with you." {
		t.Fatalf("after the hand-back: %v", evs)
	}
	all := brain.Requests()
	if len(all) != 3 {
		t.Fatalf("the model got %d requests, want 3: the approval reached it while handed off", len(all))
	}
	var kept string
	for _, ct := range all[2].Contents {
		for _, p := range ct.Parts {
			if ct.Role == "user" && strings.Contains(p.Text, "approved your pending call to kb_get") {
				kept = p.Text
			}
		}
	}
	if !strings.Contains(kept, "While a person had the conversation") || !strings.Contains(kept, "It was not made") {
		t.Errorf("after the hand-back the model's history holds %q, want the approval given while handed off", kept)
	}
}

// TestAnApprovalGivenWhileHandedOffDoesNotOutliveTheHandBack: the user
// approves the model's pending kb_get while a person has the conversation;
// the model is never told (no turn), so the approval is not left standing
// for its TTL: once the conversation is handed back, the model's repeated
// call with the same arguments asks the user again instead of running on
// it.
func TestAnApprovalGivenWhileHandedOffDoesNotOutliveTheHandBack(t *testing.T) {
	c, _ := approveWhileHandedOff(t, callStep(getCall("shipping")), textStep("Please approve it first."))

	// Within the approval's TTL, the model calls kb_get again.
	evs := c.ask("go on then")
	if again := ofType(evs, "confirm.request"); len(again) != 1 || again[0].str("tool") != "kb_get" {
		t.Fatalf("the repeated call after the hand-back: %v, want a new confirm.request for kb_get "+
			"(the approval given while handed off must not run it)", evs)
	}
	for _, r := range ofType(evs, "tool.result") {
		if r.str("name") == "kb_get" && r["ok"] == true {
			t.Fatalf("kb_get ran on the approval given while handed off: %v", evs)
		}
	}
}

// approveWhileHandedOff starts alice's session on a gateway whose model, in
// its first turn, asks for approval of kb_get and hands the conversation to
// a person ("A colleague will take over."), then answers with then. The
// user approves while the person has the conversation (answered
// confirm.done then handoff.pending: no model turn), and operator dana
// hands it back (handoff.ended).
func approveWhileHandedOff(t *testing.T, then ...func(*fakegemini.Request) fakegemini.Reply) (*wsClient, *fakegemini.ScriptBrain) {
	t.Helper()
	cfg := withPolicy(t, tokenRedisConfig(t), confirmKBGet)
	brain := fakegemini.NewScript(append([]func(*fakegemini.Request) fakegemini.Reply{
		callStep(getCall("shipping"),
			fakegemini.Call{Name: "request_human", Args: map[string]any{"reason": "wants a person", "summary": "Asked for shipping."}}),
		textStep("A colleague will take over."),
	}, then...)...)
	g := startGateway(t, cfg, brain)
	c := g.dial("", bearer(t, cfg, "alice"))
	ready := c.start(nil)
	evs := c.ask("read me the shipping article, or get me a person")
	reqs := ofType(evs, "confirm.request")
	if len(reqs) != 1 || len(ofType(evs, "handoff")) != 1 {
		t.Fatalf("the turn: %v, want a confirm.request and a handoff", evs)
	}
	confirm(c, reqs[0].str("token"), true)
	if done := c.next(); done.typ() != "confirm.done" || done.str("outcome") != "approved" {
		t.Fatalf("answer to confirm: %v, want confirm.done approved", done)
	}
	if ev := c.next(); ev.typ() != "handoff.pending" || ev.str("message") == "" {
		t.Fatalf("after confirm.done: %v, want handoff.pending (no model turn while a person has the conversation)", ev)
	}
	op := http.Header{"Turnstile-Operator": {"dana"}}
	if code := adminDo(t, "POST", g.adminURL+"/admin/sessions/"+ready.str("sessionId")+"/handback", op, "", nil); code != http.StatusOK {
		t.Fatalf("hand back: HTTP %d", code)
	}
	if ev := c.next(); ev.typ() != "handoff.ended" {
		t.Fatalf("after the hand-back: %v, want handoff.ended", ev)
	}
	return c, brain
}
