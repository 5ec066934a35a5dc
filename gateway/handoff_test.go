package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/signature"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/timeline"
)

// End-to-end tests of the hand-off to a person (docs/tools.md,
// "request_human"; docs/protocol.md, "Hand-off to a person"): the real
// genai SDK against the fake Gemini, a real redis-server shared by two
// gateways, a capture server as the help desk.

const handoffSigningSecret = "handoff-e2e-signing-secret-0123456789"

// helpDesk records the hand-off POSTs it gets.
type helpDesk struct {
	*httptest.Server
	mu  sync.Mutex
	got []captured
}

func newHelpDesk(t *testing.T) *helpDesk {
	d := &helpDesk{}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		d.mu.Lock()
		d.got = append(d.got, captured{path: r.URL.Path, header: r.Header.Clone(), body: b})
		d.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(d.Close)
	return d
}

func (d *helpDesk) requests() []captured {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]captured(nil), d.got...)
}

// TestRequestHumanHandsOffAndAnOperatorOnAnotherGatewayHandsBack: the model
// calls request_human on gateway A; the browser gets handoff, the desk a
// signed POST, the stream a record; what the user types next is answered
// handoff.pending and kept on the timeline, never sent to the model; the
// hand-off survives a resume on gateway B; an operator on A hands it back,
// B's browser hears handoff.ended, and the model answers again.
func TestRequestHumanHandsOffAndAnOperatorOnAnotherGatewayHandsBack(t *testing.T) {
	desk := newHelpDesk(t)
	cfg := tokenRedisConfig(t)
	cfg.EventsStream = fmt.Sprintf("turnstile:test:handoff:%d", time.Now().UnixNano())
	cfg.HandoffURL = desk.URL + "/desk"
	cfg.HandoffSigningSecret = gateway.Secret(handoffSigningSecret)
	summary := "Wants 300 EUR back for order 1234; above what I may refund."
	brainA := fakegemini.NewScript(
		callStep(fakegemini.Call{Name: "request_human", Args: map[string]any{"reason": "refund above my limit", "summary": summary}}),
		textStep("A colleague will take over from here."))
	// B's model speaks only after the hand-back: a message sent to it while
	// a person had the conversation would take this answer.
	brainB := fakegemini.NewScript(textStep("Back with you: the refund is approved."))
	a := startGateway(t, cfg, brainA)
	b := startGateway(t, cfg, brainB)

	c := a.dial("", bearer(t, cfg, "alice"))
	ready := c.start(nil)
	id := ready.str("sessionId")
	evs := c.ask("I want a refund of 300 EUR")
	res, hand := ofType(evs, "tool.result"), ofType(evs, "handoff")
	if len(res) != 1 || res[0].str("name") != "request_human" || res[0]["ok"] != true {
		t.Fatalf("request_human: %v", evs)
	}
	if len(hand) != 1 || hand[0].str("reason") != "refund above my limit" || hand[0].str("summary") != summary ||
		hand[0].str("at") == "" {
		t.Fatalf("handoff events %v, want one with the reason and the summary", hand)
	}
	if done := ofType(evs, "text.done"); len(done) != 1 || done[0].str("text") != "A colleague will take over from here." {
		t.Fatalf("the model's closing words: %v", evs)
	}

	// The desk got one signed notice.
	testwait.For(t, "the desk's notice", func() bool { return len(desk.requests()) == 1 })
	got := desk.requests()[0]
	if err := signature.Verify([]byte(handoffSigningSecret), got.header.Get("Turnstile-Signature"), got.body, time.Now(),
		signature.DefaultTolerance); err != nil {
		t.Errorf("the desk's notice: %v", err)
	}
	var notice map[string]any
	if err := json.Unmarshal(got.body, &notice); err != nil {
		t.Fatal(err)
	}
	if notice["event"] != "handoff" || notice["session"] != id || notice["user"] != "alice" ||
		notice["reason"] != "refund above my limit" || notice["summary"] != summary || got.path != "/desk" {
		t.Errorf("the desk got %s at %s", got.body, got.path)
	}

	// What the user types now is kept for the person, not sent to the model.
	c.send(map[string]any{"type": "text", "text": "hello? is anyone there?"})
	if ev := c.next(); ev.typ() != "handoff.pending" || ev.str("message") == "" {
		t.Fatalf("a message while handed off: %v, want handoff.pending", ev)
	}

	// handoff.pending came after the message was stored: a resume elsewhere
	// now finds it (the timeline's count of two below).
	// A resume on gateway B finds the session handed off.
	c2 := b.dial("", bearer(t, cfg, "alice"))
	ready2 := c2.start(resumeMsg(ready))
	if ready2["resumed"] != true {
		t.Fatalf("resume on B: %v", ready2)
	}
	if ev := c2.next(); ev.typ() != "handoff" || ev.str("reason") != "refund above my limit" {
		t.Fatalf("after the resume: %v, want handoff", ev)
	}
	if code := c.expectClose(); code != 4005 {
		t.Fatalf("A's connection closed %d, want 4005", code)
	}
	c2.send(map[string]any{"type": "text", "text": "still waiting"})
	if ev := c2.next(); ev.typ() != "handoff.pending" {
		t.Fatalf("a message on B while handed off: %v, want handoff.pending", ev)
	}

	// The timeline has the hand-off and the messages kept for the person.
	view := waitTimeline(t, a.adminURL, id, "the messages on the timeline", func(v timeline.View) bool {
		n := 0
		for _, ev := range v.Events {
			if ev.Event == timeline.EventHandoffText {
				n++
			}
		}
		return n == 2
	})
	if view.Session.HandedOff != "refund above my limit" {
		t.Errorf("the timeline's head says handedOff %q", view.Session.HandedOff)
	}

	// An operator on A hands it back; B's browser hears it.
	op := http.Header{"Turnstile-Operator": {"dana"}}
	if code := adminDo(t, "POST", a.adminURL+"/admin/sessions/"+id+"/handback", op, `{"reason":"refund approved"}`, nil); code != http.StatusOK {
		t.Fatalf("hand back: HTTP %d", code)
	}
	if ev := c2.next(); ev.typ() != "handoff.ended" {
		t.Fatalf("after the hand-back: %v, want handoff.ended", ev)
	}
	evs = c2.ask("so?")
	if done := ofType(evs, "text.done"); len(done) != 1 || done[0].str("text") != "Back with you: the refund is approved." {
		t.Fatalf("after the hand-back the model answers: %v", evs)
	}
	if code := adminDo(t, "POST", a.adminURL+"/admin/sessions/"+id+"/handback", op, "", nil); code != http.StatusConflict {
		t.Errorf("a second hand-back: HTTP %d, want 409", code)
	}
	if code := adminDo(t, "POST", a.adminURL+"/admin/sessions/s_nosuchsession/handback", op, "", nil); code != http.StatusNotFound {
		t.Errorf("hand-back of an unknown session: HTTP %d, want 404", code)
	}

	// The event stream has the hand-off, with the summary, and the hand-back.
	rdb := redisClientFor(t, cfg)
	msgs, err := rdb.XRange(context.Background(), cfg.EventsStream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, m := range msgs {
		var rec struct{ Kind, Event, Summary, By string }
		_ = json.Unmarshal([]byte(m.Values["record"].(string)), &rec)
		if m.Values["session"] != id {
			t.Errorf("a stream record of session %v", m.Values["session"])
		}
		switch {
		case rec.Event == timeline.EventHandoff && rec.Summary == summary:
			kinds = append(kinds, "handoff")
		case rec.Event == timeline.EventHandback && strings.HasPrefix(rec.By, "dana@"):
			kinds = append(kinds, "handback")
		case rec.Kind == timeline.KindTurn:
			kinds = append(kinds, "turn")
		}
	}
	if got := strings.Join(kinds, ","); got != "turn,handoff,handback,turn" && got != "handoff,turn,handback,turn" {
		t.Errorf("stream records %s, want the two turns, the hand-off and the hand-back", got)
	}
	if _, body := get(t, a.adminURL+"/metrics"); !strings.Contains(body, `turnstile_handoffs_total{outcome="delivered"} 1`) {
		t.Errorf("A's metrics lack one delivered hand-off")
	}
}
