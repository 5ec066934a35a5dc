package gateway_test

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/timeline"
)

// A profile's greeting (docs/profiles.md) through the browser protocol.

const supportGreeting = "Hi, this is the support desk. What can I do for you?"

func greetingProfilesDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "support.json"),
		[]byte(`{"greeting": "`+supportGreeting+`", "languageCode": "en-GB"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestProfileGreetingIsTheFirstMessageOfANewSessionOnly: a new session of
// the profile gets the greeting as text.done of turn 0 right after
// session.ready; the model is told it greeted (its instruction), and its
// contents still open with the user; a resume shows the greeting in the
// history and does not greet again; a session of the default profile is
// not greeted.
func TestProfileGreetingIsTheFirstMessageOfANewSessionOnly(t *testing.T) {
	cfg := configWith(t, map[string]string{"REDIS_URL": "redis://" + redistest.Start(t),
		"TURNSTILE_PROFILES_DIR": greetingProfilesDir(t)})
	brain := fakegemini.NewScript(textStep("My order is late."), textStep("Let me look."), textStep("Hello."))
	g := startGateway(t, cfg, brain)

	c := g.dial("", nil) // dev mode: session.start may pick any profile
	ready := c.start(map[string]any{"profile": "support"})
	if ev := c.next(); ev.typ() != "text.done" || ev["turn"] != float64(0) || ev.str("text") != supportGreeting {
		t.Fatalf("after session.ready: %v, want text.done of turn 0 with the greeting", ev)
	}
	if done := ofType(c.ask("hi"), "text.done"); len(done) != 1 || done[0]["turn"] != float64(1) {
		t.Fatalf("the first turn: %v", done)
	}
	told := func(req *fakegemini.Request, when string) {
		t.Helper()
		sys := systemText(req)
		if i := strings.Index(sys, "# Your greeting"); i < 0 || !strings.Contains(sys[i:], supportGreeting) {
			t.Errorf("%s: the system instruction does not tell the model its greeting:\n%s", when, sys)
		}
		if first := req.Contents[0]; first.Role != "user" || first.Parts[0].Text != "hi" {
			t.Errorf("%s: the contents open with %s %q, want the user's first message", when, first.Role, first.Parts[0].Text)
		}
	}
	told(brain.Requests()[0], "first turn")

	c.c.Close(websocket.StatusNormalClosure, "bye")
	c2 := g.dial("", nil)
	resumed := c2.start(resumeMsg(ready))
	hist, _ := resumed["history"].([]any)
	if len(hist) < 1 {
		t.Fatalf("resumed history %v", resumed["history"])
	}
	if h, _ := hist[0].(map[string]any); h["role"] != "model" || h["text"] != supportGreeting || h["kind"] != "greeting" ||
		h["turn"] != float64(0) {
		t.Errorf("resumed history opens with %v, want the greeting (model, kind greeting, turn 0)", h)
	}
	evs := c2.ask("where is it?")
	if evs[0].typ() != "turn.start" {
		t.Errorf("after the resume the first event is %v, want turn.start (no second greeting)", evs[0])
	}
	told(brain.Requests()[1], "after the resume")

	other := g.dial("", nil)
	other.start(nil)
	if evs := other.ask("hello"); evs[0].typ() != "turn.start" || len(ofType(evs, "text.done")) != 1 {
		t.Errorf("a default session: %v, want no greeting before its first turn", evs)
	}
	if sys := systemText(brain.Requests()[2]); strings.Contains(sys, "# Your greeting") {
		t.Errorf("a default session's model was told of a greeting:\n%s", sys)
	}
}

// TestProfileGreetingInVoiceIsShownAndTheLiveModelToldNotSpoken: a session
// started in voice gets the greeting as text first; the Live model's
// instruction says it greeted, and nothing seeds it with a model turn.
func TestProfileGreetingInVoiceIsShownAndTheLiveModelToldNotSpoken(t *testing.T) {
	cfg := configWith(t, map[string]string{"TURNSTILE_PROFILES_DIR": greetingProfilesDir(t)})
	g, script := startVoiceGateway(t, cfg, nil)
	c := g.dial("", nil)
	c.start(map[string]any{"mode": "voice", "profile": "support"})
	if ev := c.next(); ev.typ() != "text.done" || ev["turn"] != float64(0) || ev.str("text") != supportGreeting {
		t.Fatalf("after session.ready: %v, want the greeting as text.done of turn 0", ev)
	}
	if ev := c.next(); ev.typ() != "mode" || ev.str("mode") != "voice" {
		t.Fatalf("then %v, want mode voice", ev)
	}
	u := nextUpstream(t, script)
	sys := ""
	if si := u.Setup.SystemInstruction; si != nil && len(si.Parts) > 0 {
		sys = si.Parts[0].Text
	}
	if i := strings.Index(sys, "# Your greeting"); i < 0 || !strings.Contains(sys[i:], supportGreeting) {
		t.Errorf("the Live system instruction does not tell the model its greeting:\n%s", sys)
	}
	for _, ev := range u.ofKind(fakegemini.EventClientContent) {
		if texts := contentTexts(ev); len(texts) > 0 && strings.HasPrefix(texts[0], "model:") {
			t.Errorf("the Live session was seeded with a model turn first: %q", texts)
		}
	}
}

// TestProfileGreetingIsOnTheTimelineInTextAndVoice: the greeting a new
// session was shown is on the operator's timeline (a greeting event with
// its text, on the JSON view and the page), for a session started in text
// and one started in voice alike; a resumed session adds none.
func TestProfileGreetingIsOnTheTimelineInTextAndVoice(t *testing.T) {
	cfg := configWith(t, map[string]string{"TURNSTILE_PROFILES_DIR": greetingProfilesDir(t)})
	g, _ := startVoiceGateway(t, cfg, nil)
	for _, mode := range []string{"text", "voice"} {
		c := g.dial("", nil)
		ready := c.start(map[string]any{"mode": mode, "profile": "support"})
		if ev := c.next(); ev.typ() != "text.done" || ev.str("text") != supportGreeting {
			t.Fatalf("%s: after session.ready: %v, want the greeting", mode, ev)
		}
		id := ready.str("sessionId")
		view := waitTimeline(t, g.adminURL, id, mode+": the greeting on the timeline", func(v timeline.View) bool {
			return slices.ContainsFunc(v.Events, func(ev timeline.Event) bool { return ev.Event == timeline.EventGreeting })
		})
		var greetings []timeline.Event
		for _, ev := range view.Events {
			if ev.Event == timeline.EventGreeting {
				greetings = append(greetings, ev)
			}
		}
		if len(greetings) != 1 || greetings[0].Text != supportGreeting || greetings[0].Turn != 0 {
			t.Fatalf("%s: greeting events on the timeline %+v, want one of turn 0 with the greeting", mode, greetings)
		}
		if _, page := adminRequest(t, "GET", g.adminURL+"/admin/sessions/"+id, http.Header{"Accept": {"text/html"}}, ""); !strings.Contains(page, "greeting") || !strings.Contains(page, supportGreeting) {
			t.Errorf("%s: the timeline page does not show the greeting:\n%s", mode, page)
		}
		// A resume is not greeted again: once it is ready, the timeline still
		// holds the one greeting.
		c2 := g.dial("", nil)
		if again := c2.start(resumeMsg(ready)); again["resumed"] != true {
			t.Fatalf("%s: resume: %v", mode, again)
		}
		view = timeline.View{}
		adminDo(t, "GET", g.adminURL+"/admin/sessions/"+id, nil, "", &view)
		n := 0
		for _, ev := range view.Events {
			if ev.Event == timeline.EventGreeting {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: %d greeting events on the timeline after a resume, want 1", mode, n)
		}
		c2.c.Close(websocket.StatusNormalClosure, "bye")
	}
}
