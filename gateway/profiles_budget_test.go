package gateway_test

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/internal/redistest"
)

// A profile's budgets (docs/profiles.md) through the browser protocol: its
// sessions, resumed ones too, are held to them; a session of the default
// profile on the same gateway keeps the gateway's.
func TestProfileBudgetsHoldItsSessionsAcrossResumeAndLeaveOthersAlone(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "support.json"),
		[]byte(`{"budgets": {"text": {"maxRetrieval": 1, "maxCalls": 4}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := configWith(t, map[string]string{"REDIS_URL": "redis://" + redistest.Start(t), "TURNSTILE_PROFILES_DIR": dir})
	brain := fakegemini.NewScript(
		callStep(searchCall("shipping"), searchCall("returns")), textStep("One of two."),
		callStep(searchCall("shipping"), searchCall("returns")), textStep("Both."),
		callStep(searchCall("gift cards"), searchCall("brewing")), textStep("One again."),
	)
	g := startGateway(t, cfg, brain)

	secondRefused := func(evs []event, req *fakegemini.Request, when string) {
		t.Helper()
		results := resultsInCallOrder(evs)
		if len(results) != 2 || results[0]["ok"] != true || !refusedWith(results[1], "BUDGET_EXCEEDED") {
			t.Fatalf("%s: results %v, want the first run and the second refused BUDGET_EXCEEDED", when, results)
		}
		resp := lastResponses(t, req)
		if typ, msg := responseError(resp[len(resp)-1]); typ != "BUDGET_EXCEEDED" || !strings.Contains(msg, "1 retrieval calls") {
			t.Errorf("%s: the model was answered %s %q, want BUDGET_EXCEEDED naming the profile's 1 retrieval call", when, typ, msg)
		}
	}

	c := g.dial("", nil) // dev mode: session.start may pick any profile
	ready := c.start(map[string]any{"profile": "support"})
	secondRefused(c.ask("shipping and returns?"), brain.Requests()[1], "the profile's session")

	other := g.dial("", nil)
	other.start(nil)
	for i, r := range resultsInCallOrder(other.ask("shipping and returns?")) {
		if r["ok"] != true {
			t.Errorf("default session, call %d: %v, want it run under the gateway's 5 retrieval calls", i, r)
		}
	}

	c.c.Close(websocket.StatusNormalClosure, "bye")
	c2 := g.dial("", nil)
	c2.start(resumeMsg(ready))
	secondRefused(c2.ask("gift cards and brewing?"), brain.Requests()[5], "after the resume")
}

// TestProfileVoiceBudgetHoldsItsLiveTurns: a profile's voice budget (here
// one retrieval call) answers the Live model's second search
// BUDGET_EXCEEDED, where the gateway's default would let two through.
func TestProfileVoiceBudgetHoldsItsLiveTurns(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "support.json"),
		[]byte(`{"budgets": {"voice": {"maxRetrieval": 1, "maxCalls": 3}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	g, script := startVoiceGateway(t, configWith(t, map[string]string{"TURNSTILE_PROFILES_DIR": dir}), nil)
	c := g.dial("", nil)
	c.start(map[string]any{"mode": "voice", "profile": "support"})
	if ev := c.next(); ev.typ() != "mode" || ev.str("mode") != "voice" {
		t.Fatalf("after session.start voice: %v", ev)
	}
	u := nextUpstream(t, script)
	ids, err := u.SendToolCall(searchCall("hours"), searchCall("shipping"))
	must(t, err)
	resp := u.waitResponses(2)
	for _, r := range resp {
		typ, msg := responseError(r)
		switch r.ID {
		case ids[0]:
			if typ != "" {
				t.Errorf("the first search was answered %s %q, want it run", typ, msg)
			}
		case ids[1]:
			if typ != "BUDGET_EXCEEDED" || !strings.Contains(msg, "1 retrieval calls") {
				t.Errorf("the second search was answered %s %q, want BUDGET_EXCEEDED naming the profile's 1 retrieval call", typ, msg)
			}
		}
	}
	must(t, u.SendTurnComplete(nil))
	if r := resultsByID(c.until("turn.done"))[ids[1]]; !refusedWith(r, "BUDGET_EXCEEDED") {
		t.Errorf("the browser saw %v for the second search, want refused BUDGET_EXCEEDED", r)
	}
}

func TestGatewayRefusesToStartWithABadProfileBudgetNamingTheFileAndField(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "support.json"),
		[]byte(`{"budgets": {"text": {"maxRetrieval": 4, "maxCalls": 3}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := configWith(t, map[string]string{"TURNSTILE_PROFILES_DIR": dir})
	gw, err := assemble(t.Context(), cfg, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)), brains{})
	if err == nil {
		gw.close()
	}
	if err == nil || !strings.Contains(err.Error(), "support.json") || !strings.Contains(err.Error(), "budgets.text") ||
		!strings.Contains(err.Error(), "must not exceed maxCalls") {
		t.Fatalf("start: %v, want an error naming support.json and budgets.text", err)
	}
}
