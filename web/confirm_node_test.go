package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// These tests run the page's confirmation queue (confirm.js) and formatting
// (format.js) under Node, and the queue with a real Connection against a
// WebSocket server playing the gateway.

type queueItem struct {
	Token string `json:"token"`
	Tool  string `json:"tool"`
	Sent  bool   `json:"sent"`
}

type queueStep struct {
	Op      string          `json:"op"`
	Result  json.RawMessage `json:"result"`
	Queue   []queueItem     `json:"queue"`
	Changed bool            `json:"changed"`
}

// The harness's fake clock starts here.
const queueEpoch = "2030-01-01T00:00:00Z"

func expiresIn(d time.Duration) string {
	t, _ := time.Parse(time.RFC3339, queueEpoch)
	return t.Add(d).Format(time.RFC3339Nano)
}

func request(token, tool string, in time.Duration) map[string]any {
	return map[string]any{"type": "confirm.request", "turn": 1, "token": token, "tool": tool,
		"args": map[string]any{"orderId": "o-1"}, "expiresAt": expiresIn(in)}
}

func runQueue(t *testing.T, script []map[string]any) []queueStep {
	t.Helper()
	arg, err := json.Marshal(script)
	if err != nil {
		t.Fatal(err)
	}
	var steps []queueStep
	sc := bufio.NewScanner(strings.NewReader(runNode(t, "queue", string(arg))))
	for sc.Scan() {
		var s queueStep
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("harness line %q: %v", sc.Text(), err)
		}
		steps = append(steps, s)
	}
	if len(steps) != len(script) {
		t.Fatalf("harness ran %d of %d steps", len(steps), len(script))
	}
	return steps
}

func tokens(items []queueItem) string {
	var out []string
	for _, i := range items {
		s := i.Token
		if i.Sent {
			s += "(sent)"
		}
		out = append(out, s)
	}
	return strings.Join(out, ",")
}

func resultString(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("result %s is not a string", raw)
	}
	return s
}

func TestConfirmRequestsQueueInArrivalOrderWithoutDuplicatesOrExpiredOnes(t *testing.T) {
	steps := runQueue(t, []map[string]any{
		{"op": "add", "msg": request("a", "kb_refund", time.Minute)},
		{"op": "add", "msg": request("b", "kb_cancel", 2*time.Minute)},
		{"op": "add", "msg": request("a", "kb_refund", time.Minute)},
		{"op": "add", "msg": request("late", "kb_refund", -time.Second)},
		{"op": "add", "msg": map[string]any{"type": "confirm.request", "tool": "kb_refund", "expiresAt": expiresIn(time.Minute)}},
		{"op": "add", "msg": map[string]any{"type": "confirm.request", "token": "t", "expiresAt": "soon"}},
	})
	wantResults := []string{"added", "added", "duplicate", "expired", "invalid", "invalid"}
	for i, want := range wantResults {
		if got := resultString(t, steps[i].Result); got != want {
			t.Errorf("step %d: add = %q, want %q", i, got, want)
		}
	}
	if got := tokens(steps[len(steps)-1].Queue); got != "a,b" {
		t.Errorf("queue %s, want a,b (the oldest first)", got)
	}
	if steps[2].Changed || steps[3].Changed {
		t.Error("a duplicate or expired request changed the queue (the dialog would redraw)")
	}
}

func TestConfirmAnswerGoesOutOnceWithTokenAndBooleanApprove(t *testing.T) {
	steps := runQueue(t, []map[string]any{
		{"op": "add", "msg": request("a", "kb_refund", time.Minute)},
		{"op": "add", "msg": request("b", "kb_cancel", time.Minute)},
		{"op": "answer", "token": "a", "approve": true},
		{"op": "answer", "token": "a", "approve": false}, // a double click, or Esc after Allow
		{"op": "answer", "token": "b", "approve": "yes"}, // anything but true denies
		{"op": "answer", "token": "nope", "approve": true},
		{"op": "unsend", "token": "b"}, // the socket was down: b can be answered again
		{"op": "answer", "token": "b", "approve": false},
		{"op": "settle", "token": "a"},
		{"op": "settle", "token": "a"},
	})
	type fields struct {
		Token   string `json:"token"`
		Approve any    `json:"approve"`
	}
	wantAnswers := map[int]*fields{
		2: {"a", true}, 3: nil, 4: {"b", false}, 5: nil, 7: {"b", false},
	}
	for i, want := range wantAnswers {
		var got *fields
		if err := json.Unmarshal(steps[i].Result, &got); err != nil {
			t.Fatalf("step %d result %s: %v", i, steps[i].Result, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("step %d: answer gave %+v, want %+v", i, got, want)
		}
	}
	if got := tokens(steps[3].Queue); got != "a(sent),b" {
		t.Errorf("after answering a: queue %s, want a(sent),b", got)
	}
	if got := tokens(steps[6].Queue); got != "a(sent),b" {
		t.Errorf("after unsend b: queue %s, want a(sent),b", got)
	}
	if got := tokens(steps[8].Queue); got != "b(sent)" {
		t.Errorf("after confirm.done for a: queue %s, want b(sent)", got)
	}
	if string(steps[9].Result) != "null" {
		t.Errorf("a second confirm.done for a settled %s", steps[9].Result)
	}
}

func TestConfirmRequestsCloseWhenTheyExpire(t *testing.T) {
	steps := runQueue(t, []map[string]any{
		{"op": "add", "msg": request("short", "kb_refund", 30*time.Second)},
		{"op": "add", "msg": request("long", "kb_cancel", 90*time.Second)},
		{"op": "advance", "ms": 29_000},
		{"op": "expire"},
		{"op": "advance", "ms": 1_000},
		{"op": "answer", "token": "short", "approve": true}, // the clock says it is too late
		{"op": "expire"},
	})
	if got := string(steps[2].Result); got != "1000" {
		t.Errorf("next expiry 29 s in: %s ms, want 1000", got)
	}
	if got := tokens(steps[3].Queue); got != "short,long" {
		t.Errorf("expired early: %s", got)
	}
	if got := string(steps[5].Result); got != "null" {
		t.Errorf("answering an expired request gave %s, want nothing to send", got)
	}
	if got := string(steps[6].Result); got != `["short"]` || tokens(steps[6].Queue) != "long" {
		t.Errorf("expire removed %s leaving %s, want short removed and long left", got, tokens(steps[6].Queue))
	}
}

func TestReconnectRequeuesPendingConfirmationsAndDropsSettledOnes(t *testing.T) {
	steps := runQueue(t, []map[string]any{
		{"op": "add", "msg": request("a", "kb_refund", time.Minute)},
		{"op": "add", "msg": request("b", "kb_cancel", time.Minute)},
		{"op": "answer", "token": "a", "approve": true},
		// The link dropped before confirm.done; session.ready lists what is
		// still pending: a (the answer never arrived), c (new), not b
		// (answered in another tab), and one already expired.
		{"op": "replace", "list": []any{
			request("c", "kb_close", time.Minute),
			request("a", "kb_refund", time.Minute),
			request("gone", "kb_refund", -time.Second),
			request("c", "kb_close", time.Minute),
		}},
		{"op": "answer", "token": "a", "approve": false},
		{"op": "dropSent"},             // confirmation_unknown for that answer
		{"op": "replace", "list": nil}, // a new session: nothing pending
	})
	if got := tokens(steps[3].Queue); got != "c,a" {
		t.Errorf("after resume: queue %s, want c,a in the gateway's order, a answerable again", got)
	}
	if got := string(steps[3].Result); got != `["b"]` {
		t.Errorf("resume dropped %s, want [b]", got)
	}
	var again struct {
		Token   string `json:"token"`
		Approve bool   `json:"approve"`
	}
	if err := json.Unmarshal(steps[4].Result, &again); err != nil || again.Token != "a" {
		t.Errorf("a could not be answered again after the resume: %s", steps[4].Result)
	}
	if got := string(steps[5].Result); got != `["a"]` || tokens(steps[5].Queue) != "c" {
		t.Errorf("dropSent removed %s leaving %s, want a removed, c left", got, tokens(steps[5].Queue))
	}
	if len(steps[6].Queue) != 0 {
		t.Errorf("a new session kept %s", tokens(steps[6].Queue))
	}
}

func TestToolArgsAndTimesAreFormattedCompactly(t *testing.T) {
	// Raw JSON: the gateway's key order is kept (a Go map would sort it).
	arg := `{"args":[{"query":"How long does shipping take?","limit":3},` +
		`{"query":"` + strings.Repeat("x", 100) + `","token":"[redacted]"},{},null,{"filter":{"tags":["a","b"]}}],` +
		`"durations":[0,12.4,999,1432,12500,125000,-1,null],` +
		`"remaining":[42000,41001,0,-5,3725000,90000000]}`
	var got struct{ Args, Durations, Remaining []string }
	if err := json.Unmarshal([]byte(runNode(t, "format", arg)), &got); err != nil {
		t.Fatal(err)
	}
	want := struct{ Args, Durations, Remaining []string }{
		Args: []string{
			`query: "How long does shipping take?", limit: 3`,
			`query: "` + strings.Repeat("x", 39) + `…", token: [redacted]`,
			``,
			``,
			`filter: {"tags":["a","b"]}`,
		},
		Durations: []string{"0 ms", "12 ms", "999 ms", "1.4 s", "13 s", "2 min 5 s", "", ""},
		Remaining: []string{"0:42", "0:42", "0:00", "0:00", "1:02:05", "1 d 1 h"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("formatted\n got %q\nwant %q", got, want)
	}
}

// confirmGateway plays two connections: requests, an answer, then a drain
// before confirming it; after the resume, the pending list, answers and
// confirm.done (one for a request answered "in another tab"), then 4005.
type confirmGateway struct {
	mu       sync.Mutex
	conns    int
	starts   []map[string]any
	confirms []string // the confirm messages received, as raw JSON
	fail     []string
}

func (g *confirmGateway) failf(format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.fail = append(g.fail, fmt.Sprintf(format, args...))
}

func (g *confirmGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"turnstile.v1"}})
	if err != nil {
		return
	}
	defer c.CloseNow()
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	read := func() map[string]any {
		_, data, err := c.Read(ctx)
		if err != nil {
			g.failf("read: %v", err)
			return nil
		}
		var msg map[string]any
		if err := json.Unmarshal(data, &msg); err != nil {
			g.failf("client sent %q: %v", data, err)
		}
		if msg["type"] == "confirm" {
			g.mu.Lock()
			g.confirms = append(g.confirms, string(data))
			g.mu.Unlock()
		}
		return msg
	}
	write := func(v any) {
		b, _ := json.Marshal(v)
		_ = c.Write(ctx, websocket.MessageText, b)
	}
	req := func(token, tool string, in time.Duration) map[string]any {
		return map[string]any{"type": "confirm.request", "turn": 1, "token": token, "tool": tool,
			"args": map[string]any{"orderId": "o-1"}, "expiresAt": time.Now().Add(in).UTC().Format(time.RFC3339Nano)}
	}
	ready := map[string]any{"type": "session.ready", "sessionId": "s1", "resumeToken": "t1", "mode": "text",
		"turn": 1, "model": map[string]any{"name": "m", "offline": true}}

	g.mu.Lock()
	g.conns++
	n := g.conns
	g.mu.Unlock()
	start := read()
	g.mu.Lock()
	g.starts = append(g.starts, start)
	g.mu.Unlock()
	switch n {
	case 1:
		ready["resumed"] = false
		write(ready)
		write(req("a-yes", "kb_refund", time.Minute))
		write(req("late-no", "kb_refund", -time.Second))
		write(req("a-yes", "kb_refund", time.Minute))
		write(req("b-no", "kb_cancel", time.Minute))
		read() // the answer to a-yes; no confirm.done before the drain
		_ = c.Close(4100, "draining")
	case 2:
		ready["resumed"] = true
		ready["pendingConfirmations"] = []any{req("a-yes", "kb_refund", time.Minute), req("b-no", "kb_cancel", time.Minute)}
		write(ready)
		read()
		write(map[string]any{"type": "confirm.done", "token": "a-yes", "tool": "kb_refund", "outcome": "approved"})
		read()
		write(map[string]any{"type": "confirm.done", "token": "b-no", "tool": "kb_cancel", "outcome": "denied"})
		write(req("d-other", "kb_close", time.Minute))
		write(map[string]any{"type": "confirm.done", "token": "d-other", "tool": "kb_close", "outcome": "approved"})
		_ = c.Close(4005, "resumed elsewhere")
	default:
		_ = c.Close(4002, "unexpected extra connection")
	}
}

func TestConfirmationsAreAnsweredOnceAndRequeuedAfterReconnect(t *testing.T) {
	gw := &confirmGateway{}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/ws"

	var queues []string
	var last map[string]any
	sc := bufio.NewScanner(strings.NewReader(runNode(t, "confirm", url)))
	for sc.Scan() {
		var ev struct {
			Event string      `json:"event"`
			Items []queueItem `json:"items"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("harness line %q: %v", sc.Text(), err)
		}
		if ev.Event == "queue" {
			queues = append(queues, tokens(ev.Items))
		}
		_ = json.Unmarshal(sc.Bytes(), &last)
	}
	if last["state"] != "stopped" || last["code"] != float64(4005) {
		t.Errorf("the run ended with %v, want stopped by 4005", last)
	}

	gw.mu.Lock()
	defer gw.mu.Unlock()
	for _, f := range gw.fail {
		t.Error(f)
	}
	want := []string{
		`{"token":"a-yes","approve":true,"type":"confirm"}`,
		`{"token":"a-yes","approve":true,"type":"confirm"}`, // again after the resume: no confirm.done had come
		`{"token":"b-no","approve":false,"type":"confirm"}`,
	}
	if !reflect.DeepEqual(gw.confirms, want) {
		t.Errorf("the gateway received confirms\n%s\nwant\n%s", strings.Join(gw.confirms, "\n"), strings.Join(want, "\n"))
	}
	if len(gw.starts) != 2 {
		t.Fatalf("%d connections, want 2", len(gw.starts))
	}
	if resume, _ := gw.starts[1]["resume"].(map[string]any); resume["sessionId"] != "s1" {
		t.Errorf("second connection sent %v, want a resume of s1", gw.starts[1])
	}
	// The queue as the dialog saw it (empty at the new session's start):
	// late-no and the duplicate never
	// showed; after the resume a-yes was answerable again and b-no followed;
	// d-other, answered elsewhere, closed on its confirm.done.
	wantQueues := []string{
		"", "a-yes", "a-yes(sent)", "a-yes(sent),b-no",
		"a-yes,b-no", "a-yes(sent),b-no",
		"b-no", "b-no(sent)", "", "d-other", "",
	}
	if !reflect.DeepEqual(queues, wantQueues) {
		t.Errorf("queue states\n%q\nwant\n%q", queues, wantQueues)
	}
}
