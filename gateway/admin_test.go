package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/timeline"
)

// Session timelines and operator actions on the admin listener, read and
// taken on another gateway than the one holding the session, all on a
// real redis-server.

// adminDo sends an admin request and decodes its JSON answer into out
// (when not nil and the request succeeded); it returns the status.
func adminDo(t *testing.T, method, url string, h http.Header, body string, out any) int {
	t.Helper()
	code, b := adminRequest(t, method, url, h, body)
	if out != nil && code < 300 {
		if err := json.Unmarshal([]byte(b), out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, url, err, b)
		}
	}
	return code
}

// adminRequest sends a request and returns its status and body.
func adminRequest(t *testing.T, method, url string, h http.Header, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitTimeline waits until session id's timeline, read from the admin API
// at adminURL (GET /admin/sessions/<id>), satisfies ok, and returns it.
func waitTimeline(t *testing.T, adminURL, id, what string, ok func(timeline.View) bool) timeline.View {
	t.Helper()
	var view timeline.View
	testwait.For(t, what, func() bool {
		view = timeline.View{}
		return adminDo(t, "GET", adminURL+"/admin/sessions/"+id, nil, "", &view) == http.StatusOK && ok(view)
	})
	return view
}

// tokenRedisConfig is sharedRedisConfig with tokens (users by name).
func tokenRedisConfig(t *testing.T) gateway.Config {
	t.Helper()
	cfg := sharedRedisConfig(t)
	cfg.AuthSecret = gateway.Secret(strings.Repeat("k", 32))
	return cfg
}

// TestTimelineReadOnAnotherGatewayShowsTurnsAndCalls: a text turn with a
// retrieval call and a call the budget refuses runs on gateway A; gateway
// B's admin listener serves its timeline (JSON and HTML) with both calls,
// their outcomes and the node holding the session, and lists the session
// as live; the event stream holds one record per turn.
func TestTimelineReadOnAnotherGatewayShowsTurnsAndCalls(t *testing.T) {
	cfg := tokenRedisConfig(t)
	cfg.Text.MaxRetrieval = 1
	cfg.EventsStream = "turnstile:test:events"
	brain := fakegemini.NewScript(callStep(searchCall("shipping"), searchCall("returns")),
		textStep("Beans ship in two days."), textStep("You are welcome."))
	a := startGateway(t, cfg, brain)
	b := startGateway(t, cfg, fakegemini.NewScript())

	c := a.dial("", bearer(t, cfg, "alice"))
	ready := c.start(nil)
	id := ready.str("sessionId")
	evs := c.ask("How fast do you ship?")
	if r := last(evs).str("reason"); r != "end_turn" {
		t.Fatalf("turn 1: %v", evs)
	}
	c.ask("thanks")

	view := waitTimeline(t, b.adminURL, id, "both turns on the timeline, read on gateway B",
		func(v timeline.View) bool { return len(v.Turns) == 2 })
	s := view.Session
	if s.ID != id || s.UserID != "alice" || s.User != a.gw.sessions.Pseudonym("alice") || !strings.HasPrefix(s.User, "u_") ||
		s.Node != a.gw.sessions.Node() || s.Mode != "text" || s.Turns != 2 {
		t.Fatalf("session head read on B: %+v (A is %s)", s, a.gw.sessions.Node())
	}
	t1 := view.Turns[0]
	if t1.Turn != 1 || t1.Mode != "text" || t1.Input != "How fast do you ship?" || t1.Answer != "Beans ship in two days." ||
		t1.EndReason != "end_turn" || t1.CallCount != 2 || len(t1.Calls) != 2 || t1.End.Before(t1.Start) {
		t.Fatalf("turn 1 on the timeline: %+v", t1)
	}
	byTool := map[string]timeline.Call{}
	for _, call := range t1.Calls {
		byTool[call.Args["query"].(string)] = call
	}
	if ok := byTool["shipping"]; ok.Tool != "kb_search" || ok.Outcome != "ok" || ok.ID == "" || ok.ErrorType != "" {
		t.Errorf("the retrieval call: %+v", ok)
	}
	if refused := byTool["returns"]; refused.Outcome != "refused" || refused.ErrorType != "BUDGET_EXCEEDED" {
		t.Errorf("the refused call: %+v", refused)
	}
	if t2 := view.Turns[1]; t2.Turn != 2 || t2.Input != "thanks" || t2.Answer != "You are welcome." || len(t2.Calls) != 0 {
		t.Errorf("turn 2 on the timeline: %+v", t2)
	}

	// The page is readable, and escapes what the user typed.
	c.ask("<script>alert(1)</script>")
	var page string
	testwait.For(t, "turn 3 on the page", func() bool {
		_, page = adminRequest(t, "GET", b.adminURL+"/admin/sessions/"+id, http.Header{"Accept": {"text/html"}}, "")
		return strings.Contains(page, "Turn 3")
	})
	if strings.Contains(page, "<script>alert") || !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") ||
		!strings.Contains(page, "BUDGET_EXCEEDED") || !strings.Contains(page, a.gw.sessions.Node()) {
		t.Errorf("the timeline page does not show the turns escaped:\n%s", page)
	}

	// B lists the session held by A, and finds it by user.
	var list struct{ Sessions []map[string]any }
	testwait.For(t, "the session listed live on B", func() bool {
		list.Sessions = nil
		adminDo(t, "GET", b.adminURL+"/admin/?q=alice", nil, "", &list)
		return len(list.Sessions) == 1
	})
	if row := list.Sessions[0]; row["id"] != id || row["node"] != a.gw.sessions.Node() || row["mode"] != "text" ||
		row["turns"] != float64(3) {
		t.Errorf("live row: %v", row)
	}
	adminDo(t, "GET", b.adminURL+"/admin/?q=bob", nil, "", &list)
	if len(list.Sessions) != 0 {
		t.Errorf("search for bob lists %v", list.Sessions)
	}

	// The stream holds one record per turn, the timeline's entry.
	rdb := redisClientFor(t, cfg)
	msgs, err := rdb.XRange(context.Background(), cfg.EventsStream, "-", "+").Result()
	if err != nil || len(msgs) != 3 {
		t.Fatalf("stream: %d records (%v), want 3", len(msgs), err)
	}
	for i, m := range msgs {
		var rec timeline.Turn
		if err := json.Unmarshal([]byte(m.Values["record"].(string)), &rec); err != nil || rec.Turn != i+1 ||
			rec.Session != id || m.Values["session"] != id || rec.User != s.User {
			t.Errorf("stream record %d: %v (%v)", i, m.Values, err)
		}
	}

	// gateway events tail prints them, one JSON record a line.
	var out, errOut strings.Builder
	env := map[string]string{"REDIS_URL": string(cfg.RedisURL), "TURNSTILE_EVENTS_STREAM": cfg.EventsStream}
	if code := realMain([]string{"events", "tail", "-from", "0", "-count", "3"}, func(k string) string { return env[k] },
		&out, &errOut); code != 0 {
		t.Fatalf("gateway events tail: exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || lines[0] != msgs[0].Values["record"] || lines[2] != msgs[2].Values["record"] {
		t.Errorf("gateway events tail printed %q", out.String())
	}

	// When the browser leaves, the session is no longer held, and its
	// timeline says how it closed.
	_ = c.c.Close(1000, "bye")
	view = waitTimeline(t, b.adminURL, id, "the close on the timeline", func(v timeline.View) bool {
		return len(v.Events) > 0 && v.Events[len(v.Events)-1].Event == timeline.EventClose
	})
	if view.Session.Node != "" || view.Events[len(view.Events)-1].Reason != "client_closed" {
		t.Errorf("after the close: %+v, events %+v", view.Session, view.Events)
	}
	if code := adminDo(t, "GET", b.adminURL+"/admin/sessions/s_nosuchsession", nil, "", nil); code != http.StatusNotFound {
		t.Errorf("unknown session: HTTP %d, want 404", code)
	}
}

// TestOperatorClosesALiveSessionFromAnotherGateway: an operator on gateway
// B closes alice's session that gateway A holds: her browser gets 4009,
// a resume is refused, and the action is on the timeline with who did it.
func TestOperatorClosesALiveSessionFromAnotherGateway(t *testing.T) {
	cfg := tokenRedisConfig(t)
	a := startGateway(t, cfg, fakegemini.NewScript(textStep("Hello.")))
	b := startGateway(t, cfg, fakegemini.NewScript())

	c := a.dial("", bearer(t, cfg, "alice"))
	ready := c.start(nil)
	id := ready.str("sessionId")
	c.ask("hi")

	op := http.Header{"Turnstile-Operator": {"dana"}}
	if code := adminDo(t, "POST", b.adminURL+"/admin/sessions/"+id+"/close", op, `{"reason":"abusive"}`, nil); code != http.StatusOK {
		t.Fatalf("close: HTTP %d", code)
	}
	if code := c.expectClose(); code != 4009 {
		t.Fatalf("the browser was closed %d, want 4009 (ended by the operator)", code)
	}
	again := a.dial("", bearer(t, cfg, "alice"))
	msg := resumeMsg(ready)
	msg["type"] = "session.start"
	again.send(msg)
	if ev := again.next(); ev.typ() != "error" || ev.str("code") != "resume_refused" {
		t.Fatalf("resume after the operator's close: %v", ev)
	}
	if code := again.expectClose(); code != 4004 {
		t.Fatalf("resume after the operator's close: closed %d, want 4004", code)
	}

	view := waitTimeline(t, a.adminURL, id, "the operator's close on the timeline",
		func(v timeline.View) bool { return len(v.Events) >= 2 })
	var op1, closed bool
	for _, ev := range view.Events {
		op1 = op1 || ev.Event == timeline.EventOperator && strings.HasPrefix(ev.By, "dana@") && strings.Contains(ev.Reason, "abusive")
		closed = closed || ev.Event == timeline.EventClose && ev.Code == 4009 && ev.Reason == "operator_closed"
	}
	if !op1 || !closed || !strings.HasPrefix(view.Session.Closed, "dana@") {
		t.Errorf("timeline after the operator's close: %+v %+v", view.Session, view.Events)
	}
	if code := adminDo(t, "POST", b.adminURL+"/admin/sessions/s_nosuchsession/close", nil, "", nil); code != http.StatusNotFound {
		t.Errorf("closing an unknown session: HTTP %d, want 404", code)
	}
}

// TestOperatorBlocksAUserOnEveryGateway: an operator on gateway B blocks
// alice: her live session on A is told at once and refuses input, a new
// connection is refused 4003, bob is untouched; lifting the block lets
// her in again.
func TestOperatorBlocksAUserOnEveryGateway(t *testing.T) {
	cfg := tokenRedisConfig(t)
	brain := fakegemini.NewScript(textStep("Hello Bob."), textStep("Welcome back."))
	a := startGateway(t, cfg, brain)
	b := startGateway(t, cfg, fakegemini.NewScript())
	alice := bearer(t, cfg, "alice")

	c := a.dial("", alice)
	c.start(nil)
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	if code := adminDo(t, "POST", b.adminURL+"/admin/users/alice/block", nil,
		`{"until":"`+until+`","reason":"spam"}`, nil); code != http.StatusOK {
		t.Fatalf("block: HTTP %d", code)
	}
	if ev := c.next(); ev.typ() != "blocked" || ev.str("until") != until || ev.str("reason") != "spam" {
		t.Fatalf("alice's live session on A after the block: %v", ev)
	}
	c.send(map[string]any{"type": "text", "text": "hello?"})
	if ev := c.next(); ev.typ() != "error" || ev.str("code") != "blocked" {
		t.Fatalf("text while blocked: %v", ev)
	}
	nc := a.dial("", alice)
	nc.send(map[string]any{"type": "session.start"})
	if ev := nc.next(); ev.typ() != "blocked" {
		t.Fatalf("new connection while blocked: %v", ev)
	}
	if code := nc.expectClose(); code != 4003 {
		t.Fatalf("new connection while blocked: closed %d, want 4003", code)
	}
	bc := a.dial("", bearer(t, cfg, "bob"))
	bc.start(nil)
	if evs := bc.ask("hi"); last(evs).str("reason") != "end_turn" {
		t.Fatalf("bob while alice is blocked: %v", evs)
	}

	for _, bad := range []string{`{"until":"tomorrow"}`, `{"until":"2001-01-01T00:00:00Z"}`, `not json`} {
		if code := adminDo(t, "POST", b.adminURL+"/admin/users/alice/block", nil, bad, nil); code != http.StatusBadRequest {
			t.Errorf("block with %s: HTTP %d, want 400", bad, code)
		}
	}

	var lifted map[string]any
	if code := adminDo(t, "DELETE", b.adminURL+"/admin/users/alice/block", nil, "", &lifted); code != http.StatusOK ||
		lifted["hadBlock"] != true {
		t.Fatalf("lift: HTTP %d %v", code, lifted)
	}
	// Her open session takes input again once A heard of it.
	testwait.For(t, "the lifted block to reach A", func() bool {
		c.send(map[string]any{"type": "text", "text": "back again"})
		for {
			ev := c.next()
			switch {
			case ev.typ() == "error" && ev.str("code") == "blocked":
				return false
			case ev.typ() == "turn.done":
				return true
			}
		}
	})
}

// TestAdminListenerNeedsItsTokenWhenSet: with a token, the admin
// routes answer 401 without it and serve with it; /metrics stays closed
// unless left open; the probes stay open.
func TestAdminListenerNeedsItsTokenWhenSet(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.AdminToken = gateway.Secret(strings.Repeat("a", 32))
	g := startGateway(t, cfg, fakegemini.NewScript())
	good := http.Header{"Authorization": {"Bearer " + strings.Repeat("a", 32)}}
	bad := http.Header{"Authorization": {"Bearer " + strings.Repeat("b", 32)}}
	for _, path := range []string{"/admin/", "/metrics", "/metrics/summary", "/admin/sessions/s_x"} {
		if code := adminDo(t, "GET", g.adminURL+path, nil, "", nil); code != http.StatusUnauthorized {
			t.Errorf("%s without the token: HTTP %d, want 401", path, code)
		}
		if code := adminDo(t, "GET", g.adminURL+path, bad, "", nil); code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token: HTTP %d, want 401", path, code)
		}
	}
	if code := adminDo(t, "POST", g.adminURL+"/admin/users/alice/block", nil, `{"until":"2099-01-01T00:00:00Z"}`, nil); code != http.StatusUnauthorized {
		t.Errorf("block without the token: HTTP %d, want 401", code)
	}
	for _, path := range []string{"/admin/", "/metrics", "/healthz"} {
		if code := adminDo(t, "GET", g.adminURL+path, good, "", nil); code != http.StatusOK {
			t.Errorf("%s with the token: HTTP %d, want 200", path, code)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _ := get(t, g.adminURL+path); code != http.StatusOK {
			t.Errorf("probe %s without the token: HTTP %d, want 200", path, code)
		}
	}

	cfg.AdminMetricsOpen = true
	open := startGateway(t, cfg, fakegemini.NewScript())
	if code, _ := get(t, open.adminURL+"/metrics"); code != http.StatusOK {
		t.Errorf("/metrics left open: HTTP %d, want 200", code)
	}
	if code, _ := get(t, open.adminURL+"/admin/"); code != http.StatusUnauthorized {
		t.Errorf("/admin/ with /metrics left open: HTTP %d, want 401", code)
	}
}
