package gateway_test

import (
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/timeline"
)

// End-to-end tests of assistant profiles (docs/profiles.md): a profiles
// folder, tokens that pick or allow them, the browser protocol, the real
// genai SDK against the fake Gemini server, a real redis-server.

const salesProfile = `{"systemPrompt": "You are Bean, the sales assistant of the coffee shop.",
  "tools": ["kb_search", "finish"], "voice": "Puck", "languageCode": "de-DE"}`

func profilesDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"sales.json": salesProfile,
		"support.json": `{"systemPrompt": "You are the support desk."}`} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// profileToken is a browser token of alice with extra claims.
func profileToken(t *testing.T, claims jwt.MapClaims) http.Header {
	t.Helper()
	claims["sub"], claims["exp"] = "alice", time.Now().Add(time.Hour).Unix()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(identityAuthSecret))
	if err != nil {
		t.Fatal(err)
	}
	return http.Header{"Authorization": {"Bearer " + tok}}
}

func declared(tools []*genai.Tool) []string {
	var out []string
	for _, t := range tools {
		for _, d := range t.FunctionDeclarations {
			out = append(out, d.Name)
		}
	}
	slices.Sort(out)
	return out
}

func TestSessionWithContextAndProfileShowsBothToTheModelAndKeepsThemOnResume(t *testing.T) {
	cfg := configWith(t, map[string]string{"REDIS_URL": "redis://" + redistest.Start(t),
		"TURNSTILE_AUTH_SECRET": identityAuthSecret, "TURNSTILE_PROFILES_DIR": profilesDir(t)})
	brain := fakegemini.NewScript(textStep("Hallo!"), textStep("Gern."))
	g := startGateway(t, cfg, brain)
	tok := profileToken(t, jwt.MapClaims{"profiles": []string{"sales"}})
	c := g.dial("", tok)
	ready := c.start(map[string]any{"profile": "sales", "context": map[string]any{"page": "/orders/1234"}})
	c.ask("hi")

	check := func(req *fakegemini.Request, when string) {
		t.Helper()
		sys := systemText(req)
		for _, want := range []string{"You are Bean, the sales assistant", `<page-context>` + "\n" + `{"page":"/orders/1234"}`,
			"The user's language is de-DE"} {
			if !strings.Contains(sys, want) {
				t.Errorf("%s: the system instruction lacks %q:\n%s", when, want, sys)
			}
		}
		if got := declared(req.Tools); !slices.Equal(got, []string{"finish", "kb_search"}) {
			t.Errorf("%s: declared tools %v, want the profile's finish and kb_search", when, got)
		}
	}
	check(brain.Requests()[0], "first turn")
	var view timeline.View
	adminDo(t, "GET", g.adminURL+"/admin/sessions/"+ready.str("sessionId"), nil, "", &view)
	if view.Session.Profile != "sales" {
		t.Errorf("timeline profile %q, want sales", view.Session.Profile)
	}

	// Resumed without asking for the profile again: it keeps it.
	c.c.Close(websocket.StatusNormalClosure, "bye")
	c2 := g.dial("", tok)
	c2.start(resumeMsg(ready))
	c2.ask("danke")
	check(brain.Requests()[1], "after the resume")
}

func TestProfileIsPickedByTheTokenAndRefusedWhenNotAllowedOrUnknown(t *testing.T) {
	cfg := configWith(t, map[string]string{"TURNSTILE_AUTH_SECRET": identityAuthSecret,
		"TURNSTILE_PROFILES_DIR": profilesDir(t)})
	brain := fakegemini.NewScript(textStep("Support here."), textStep("Default here."))
	g := startGateway(t, cfg, brain)

	// The token's profile claim picks it without session.start asking.
	c := g.dial("", profileToken(t, jwt.MapClaims{"profile": "support"}))
	c.start(nil)
	c.ask("hi")
	if sys := systemText(brain.Requests()[0]); !strings.HasPrefix(sys, "You are the support desk.") {
		t.Errorf("token profile: system instruction starts %.80q", sys)
	}
	// No profile: today's default prompt, every tool.
	c = g.dial("", profileToken(t, jwt.MapClaims{}))
	c.start(nil)
	c.ask("hi")
	if sys := systemText(brain.Requests()[1]); strings.Contains(sys, "support desk") || strings.Contains(sys, "Bean") {
		t.Errorf("the default session got a profile's prompt: %.80q", sys)
	}

	for _, tc := range []struct {
		name   string
		claims jwt.MapClaims
		ask    string
		want   string
	}{
		{"not in the token's profiles", jwt.MapClaims{"profiles": []string{"support"}}, "sales", "does not allow"},
		{"no profiles claim", jwt.MapClaims{}, "sales", "does not allow"},
		{"unknown", jwt.MapClaims{"profiles": []string{"ghost"}}, "ghost", `no profile "ghost"`},
		{"unknown in the token", jwt.MapClaims{"profile": "ghost"}, "", `no profile "ghost"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := g.dial("", profileToken(t, tc.claims))
			msg := map[string]any{"type": "session.start"}
			if tc.ask != "" {
				msg["profile"] = tc.ask
			}
			c.send(msg)
			ev := c.next()
			if ev.typ() != "error" || ev.str("code") != "profile_refused" || !strings.Contains(ev.str("message"), tc.want) {
				t.Errorf("answer %v, want profile_refused saying %q", ev, tc.want)
			}
			if code := c.expectClose(); code != websocket.StatusCode(4002) {
				t.Errorf("closed %d, want 4002", code)
			}
		})
	}
}

func TestProfilesVoiceReachesLive(t *testing.T) {
	cfg := configWith(t, map[string]string{"TURNSTILE_PROFILES_DIR": profilesDir(t), "TURNSTILE_LIVE_VOICE": "Kore"})
	g, script := startVoiceGateway(t, cfg, nil)
	c := g.dial("", nil) // dev mode: any profile may be picked
	c.start(map[string]any{"mode": "voice", "profile": "sales"})
	if ev := c.next(); ev.typ() != "mode" {
		t.Fatalf("after session.start voice: %v", ev)
	}
	u := nextUpstream(t, script)
	if v, l := speech(u); v != "Puck" || l != "de-DE" {
		t.Errorf("setup speech = %q %q, want the profile's Puck and de-DE", v, l)
	}
	if got := declared(u.Setup.Tools); slices.Contains(got, "start_voice_session") || !slices.Contains(got, "kb_search") {
		t.Errorf("Live declared %v, want the profile's subset", got)
	}
}

func TestGatewayRefusesToStartWithABadProfileNamingTheFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sales.json"), []byte(`{"tools": ["rm_rf"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := configWith(t, map[string]string{"TURNSTILE_PROFILES_DIR": dir})
	gw, err := assemble(t.Context(), cfg, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)), brains{})
	if err == nil {
		gw.close()
	}
	if err == nil || !strings.Contains(err.Error(), "sales.json") || !strings.Contains(err.Error(), "rm_rf") {
		t.Fatalf("start: %v, want an error naming sales.json and the unknown tool", err)
	}
}
