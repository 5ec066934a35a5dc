package gateway_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// exampleToolDir copies examples/tools/create_ticket into a folder of its
// own, pointed at url instead of the example ticket API's fixed port.
func exampleToolDir(t *testing.T, url string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "create_ticket")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"schema.json", "guide.md"} {
		b, err := os.ReadFile(filepath.Join("..", "examples", "tools", "create_ticket", f))
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if f == "schema.json" {
			const example = "http://127.0.0.1:8089"
			if !strings.Contains(s, example) {
				t.Fatalf("the example manifest no longer calls %s; update this test and examples/README.md", example)
			}
			s = strings.Replace(s, example, url, 1)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Dir(dir)
}

// The walk-through of examples/README.md: the example create_ticket folder
// (no Go code), the offline demo model, "/call create_ticket {…}", the
// user's approval, and the ticket is created once.
func TestTheExampleTicketToolCanBeTriedWithTheOfflineDemo(t *testing.T) {
	svc := newTicketService(t)
	cfg := configWith(t, map[string]string{"TURNSTILE_TOOLS_DIR": exampleToolDir(t, svc.URL), "TICKETS_API_KEY": "dev-key"})
	g := startGateway(t, cfg, nil)
	c := g.dial("", nil)
	ready := c.start(nil)
	listed := false
	tools, _ := ready["tools"].([]any)
	for _, tool := range tools {
		m, _ := tool.(map[string]any)
		listed = listed || (m["name"] == "create_ticket" && m["requiresConfirmation"] == true)
	}
	if !listed {
		t.Fatalf("session.ready does not list create_ticket with its confirmation: %v", ready)
	}

	evs := c.ask(`/call create_ticket {"title":"printer on fire","details":"smoke from tray 2"}`)
	res := ofType(evs, "tool.result")
	if len(res) != 1 || !refusedWith(res[0], "CONFIRMATION_REQUIRED") {
		t.Fatalf("first call: %v", evs)
	}
	reqs := ofType(evs, "confirm.request")
	if len(reqs) != 1 || reqs[0].str("tool") != "create_ticket" {
		t.Fatalf("confirm.request: %v", evs)
	}
	if len(svc.created) != 0 {
		t.Fatal("a ticket was created before the approval")
	}

	confirm(c, reqs[0].str("token"), true)
	if done := c.next(); done.typ() != "confirm.done" || done.str("outcome") != "approved" {
		t.Fatalf("confirm answered %v", done)
	}
	evs = c.until("turn.done")
	res = ofType(evs, "tool.result")
	if len(res) != 1 || res[0]["ok"] != true {
		t.Fatalf("the approved call: %v", evs)
	}
	text := ofType(evs, "text.done")
	if len(text) != 1 || !strings.HasPrefix(text[0].str("text"), "The create_ticket tool succeeded") || !strings.Contains(text[0].str("text"), "T-1") {
		t.Fatalf("the demo's answer: %v", text)
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if strings.Join(svc.created, "|") != "printer on fire" || strings.Join(svc.auth, "|") != "Bearer dev-key" {
		t.Fatalf("tickets %q with credentials %q; want one, with the key from the environment", svc.created, svc.auth)
	}
}
