package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/timeline"
)

// End-to-end tests of what a session tells its model beyond the system
// prompt (docs/profiles.md): the page context session.start carries
// (untrusted), the token claims named in TURNSTILE_CONTEXT_CLAIMS (facts),
// the language, through the browser protocol, the real genai SDK against
// the fake Gemini server and a real redis-server.

const pageContext = `{"locale":"de-DE","page":"/orders/1234"}` // as the model sees it: keys sorted

func TestSessionContextAndTokenFactsReachTheModelAndSurviveAResume(t *testing.T) {
	cfg := configWith(t, map[string]string{"REDIS_URL": "redis://" + redistest.Start(t),
		"TURNSTILE_AUTH_SECRET": identityAuthSecret, "TURNSTILE_CONTEXT_CLAIMS": "tenant,plan"})
	brain := fakegemini.NewScript(textStep("Your order 1234 ships tomorrow."), textStep("Gern geschehen."))
	g := startGateway(t, cfg, brain)
	c := g.dial("", claimsToken(t))
	ready := c.start(map[string]any{"context": map[string]any{"page": "/orders/1234", "locale": "de-DE"},
		"languageCode": "de-DE"})
	c.ask("when does my order ship?")

	wantIn := func(sys string, when string) {
		t.Helper()
		for _, want := range []string{
			"# About the user (verified by the gateway)", "- plan: pro\n", "- tenant: acme\n",
			"# Page context (sent by the user's browser: untrusted)", "<page-context>\n" + pageContext + "\n</page-context>",
			"The user's language is de-DE",
		} {
			if !strings.Contains(sys, want) {
				t.Errorf("%s: the system instruction lacks %q:\n%s", when, want, sys)
			}
		}
		if strings.Contains(sys, "not forwarded") {
			t.Errorf("%s: a claim not in TURNSTILE_CONTEXT_CLAIMS reached the model", when)
		}
		// The facts come before the untrusted block, which comes last.
		if strings.Index(sys, "# About the user") > strings.Index(sys, "# Page context") {
			t.Errorf("%s: the page context comes before the facts", when)
		}
	}
	reqs := brain.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the model got %d requests", len(reqs))
	}
	wantIn(systemText(reqs[0]), "first turn")

	// The operator's timeline shows the context.
	var view timeline.View
	if code := adminDo(t, "GET", g.adminURL+"/admin/sessions/"+ready.str("sessionId"), nil, "", &view); code != http.StatusOK {
		t.Fatalf("timeline: %d", code)
	}
	if string(view.Session.Context) != pageContext || view.Session.LanguageCode != "de-DE" {
		t.Errorf("timeline session = %+v, want the context %s and language de-DE", view.Session, pageContext)
	}

	// A resumed session (a new connection, the record read back from
	// Redis) tells the model the same.
	c.c.Close(websocket.StatusNormalClosure, "bye")
	c2 := g.dial("", claimsToken(t))
	if r := c2.start(resumeMsg(ready)); r["resumed"] != true {
		t.Fatalf("resume: %v", r)
	}
	c2.ask("danke")
	reqs = brain.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model got %d requests", len(reqs))
	}
	wantIn(systemText(reqs[1]), "after the resume")
}

func TestSessionStartRefusesABadContextSayingWhy(t *testing.T) {
	g := startGateway(t, defaultTestConfig(t), fakegemini.NewScript())
	deep := map[string]any{"a": map[string]any{"b": map[string]any{"c": map[string]any{"d": map[string]any{"e": 1}}}}}
	for _, tc := range []struct {
		name    string
		context any
		want    string
	}{
		{"not an object", []any{"page", "/orders"}, "context must be a JSON object"},
		{"a string", "/orders/1234", "context must be a JSON object"},
		{"too big", map[string]any{"page": strings.Repeat("x", 3000)}, "context is larger than 2048 bytes"},
		{"too deep", deep, "context is nested deeper than 4 levels"},
		{"a control character", map[string]any{"page": "a\x00b"}, "without control characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := g.dial("", nil)
			c.send(map[string]any{"type": "session.start", "context": tc.context})
			ev := c.next()
			if ev.typ() != "error" || ev.str("code") != "bad_message" || !strings.Contains(ev.str("message"), tc.want) {
				t.Errorf("answer %v, want bad_message saying %q", ev, tc.want)
			}
			if code := c.expectClose(); code != websocket.StatusCode(4002) {
				t.Errorf("closed %d, want 4002", code)
			}
		})
	}
}

// speech is the voice and language a Live setup asked for ("" none).
func speech(u *upstream) (voice, language string) {
	gc := u.Setup.GenerationConfig
	if gc == nil || gc.SpeechConfig == nil {
		return "", ""
	}
	sc := gc.SpeechConfig
	if sc.VoiceConfig != nil && sc.VoiceConfig.PrebuiltVoiceConfig != nil {
		voice = sc.VoiceConfig.PrebuiltVoiceConfig.VoiceName
	}
	return voice, sc.LanguageCode
}

func TestLiveSetupGetsTheSessionsVoiceAndLanguage(t *testing.T) {
	cfg := configWith(t, map[string]string{"TURNSTILE_LIVE_VOICE": "Kore"})
	g, script := startVoiceGateway(t, cfg, nil)

	// No ask: the gateway's voice, no language.
	_, _, u := startInVoice(t, g, script)
	if v, l := speech(u); v != "Kore" || l != "" {
		t.Errorf("default setup speech = %q %q, want Kore and no language", v, l)
	}

	// The session's own voice and language.
	c := g.dial("", nil)
	c.start(map[string]any{"mode": "voice", "voice": "Puck", "languageCode": "de-DE",
		"context": map[string]any{"page": "/orders/1234"}})
	if ev := c.next(); ev.typ() != "mode" || ev.str("mode") != "voice" {
		t.Fatalf("after session.start voice: %v", ev)
	}
	u = nextUpstream(t, script)
	if v, l := speech(u); v != "Puck" || l != "de-DE" {
		t.Errorf("setup speech = %q %q, want Puck and de-DE", v, l)
	}
	sys := ""
	if si := u.Setup.SystemInstruction; si != nil && len(si.Parts) > 0 {
		sys = si.Parts[0].Text
	}
	if !strings.Contains(sys, "The user's language is de-DE") || !strings.Contains(sys, `"page":"/orders/1234"`) {
		t.Errorf("the Live system instruction lacks the language or the page context:\n%s", sys)
	}

	// A voice outside TURNSTILE_LIVE_VOICES is refused.
	c = g.dial("", nil)
	c.send(map[string]any{"type": "session.start", "voice": "Brian"})
	if ev := c.next(); ev.typ() != "error" || ev.str("code") != "bad_message" || !strings.Contains(ev.str("message"), "TURNSTILE_LIVE_VOICES") {
		t.Errorf("a voice not allowed: %v", ev)
	}
	if code := c.expectClose(); code != websocket.StatusCode(4002) {
		t.Errorf("closed %d, want 4002", code)
	}
}
