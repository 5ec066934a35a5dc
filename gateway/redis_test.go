package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/redistest"
)

func TestResumeOnAnotherGatewaySharingRedis(t *testing.T) {
	addr := redistest.Start(t) // a real redis-server
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + addr)
	brainA := fakegemini.NewScript(fakegemini.Fixed(fakegemini.TextReply("Beans ship in two days.", 2)))
	brainB := fakegemini.NewScript(fakegemini.Fixed(fakegemini.TextReply("Yes, worldwide.", 2)))
	a := startGateway(t, cfg, brainA)
	b := startGateway(t, cfg, brainB)

	c := a.dial("", nil)
	ready := c.start(nil)
	c.ask("How fast do you ship?")
	_ = c.c.CloseNow() // the connection drops

	c2 := b.dial("", nil)
	again := c2.start(map[string]any{"resume": map[string]any{
		"sessionId": ready.str("sessionId"), "resumeToken": ready.str("resumeToken")}})
	if again["resumed"] != true || again.str("sessionId") != ready.str("sessionId") || again["turn"] != float64(1) {
		t.Fatalf("resume on gateway B: %v", again)
	}
	hist, _ := again["history"].([]any)
	if len(hist) != 2 {
		t.Fatalf("history on resume = %v", again["history"])
	}
	evs := c2.ask("Internationally too?")
	if last(evs)["turn"] != float64(2) {
		t.Fatalf("turn numbering did not continue: %v", last(evs))
	}
	// Gateway B's model saw the conversation held on gateway A.
	var said []string
	for _, content := range brainB.Requests()[0].Contents {
		for _, p := range content.Parts {
			said = append(said, content.Role+":"+p.Text)
		}
	}
	want := "user:How fast do you ship?|model:Beans ship in two days.|user:Internationally too?"
	if got := strings.Join(said, "|"); got != want {
		t.Fatalf("history sent to the model on B = %q, want %q", got, want)
	}
}

func TestRedisOutage(t *testing.T) {
	mr := miniredis.RunT(t)
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + mr.Addr())
	step := fakegemini.Fixed(fakegemini.TextReply("noted", 1))
	brain := fakegemini.NewScript(step, step, step, step)
	g := startGateway(t, cfg, brain)

	c := g.dial("", nil)
	ready := c.start(nil)
	c.ask("one")

	mr.Close()
	if code, body := get(t, g.url+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "redis") {
		t.Fatalf("/readyz with Redis down: %d %s", code, body)
	}
	// A new session is refused with a clear, retryable error.
	nc := g.dial("", nil)
	nc.send(map[string]any{"type": "session.start"})
	if ev := nc.next(); ev.str("code") != "store_unavailable" || ev["retryable"] != true {
		t.Fatalf("new session with Redis down: %v", ev)
	}
	if code := nc.expectClose(); code != 4103 {
		t.Fatalf("close %d, want 4103", code)
	}
	// The running session goes on from memory.
	if evs := c.ask("two, while Redis is down"); last(evs).str("reason") != "end_turn" {
		t.Fatalf("turn during outage: %v", evs)
	}

	if err := mr.Restart(); err != nil {
		t.Fatal(err)
	}
	if code, _ := get(t, g.url+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz after Redis returned: %d", code)
	}
	c.ask("three")
	_ = c.c.CloseNow()

	// Redis caught up: a resume sees every turn, including the one during the outage.
	c2 := g.dial("", nil)
	again := c2.start(map[string]any{"resume": map[string]any{
		"sessionId": ready.str("sessionId"), "resumeToken": ready.str("resumeToken")}})
	var users []string
	for _, h := range again["history"].([]any) {
		if item := h.(map[string]any); item["role"] == "user" {
			users = append(users, item["text"].(string))
		}
	}
	if got := strings.Join(users, "|"); got != "one|two, while Redis is down|three" {
		t.Fatalf("history after the outage = %q", got)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
