package web

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"
)

// These tests run the page's protocol.js under Node (skipped where Node is
// not installed): its close-code policy against docs/protocol.md, its
// backoff, and a real reconnect-and-resume run against a WebSocket server.

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// runNode runs testdata/harness.mjs next to copies of the shipped modules
// and returns its stdout.
func runNode(t *testing.T, mode, arg string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	dir := t.TempDir()
	for _, js := range jsFiles(t) {
		writeFile(t, filepath.Join(dir, js.name), js.body)
	}
	harness, err := os.ReadFile("testdata/harness.mjs")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "harness.mjs"), string(harness))
	writeFile(t, filepath.Join(dir, "package.json"), `{"type":"module"}`)

	args := []string{"harness.mjs", mode, arg}
	// Node 20 has WebSocket behind a flag; later versions have it always.
	if exec.Command(node, "--experimental-websocket", "-e", "0").Run() == nil {
		args = append([]string{"--experimental-websocket"}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	stdout, err := cmd.Output()
	if code := cmd.ProcessState.ExitCode(); code == 3 {
		t.Skip("this node has no WebSocket")
	}
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("node %s: %v\nstdout:\n%s\nstderr:\n%s", mode, err, stdout, stderr)
	}
	return string(stdout)
}

func writeFile(t *testing.T, name, body string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCloseCodesAreHandledAsDocumented(t *testing.T) {
	want := map[int]string{}
	for _, row := range tableRows(t, protocolDoc(t), "## Close codes") {
		code, err := strconv.Atoi(row[0])
		if err != nil || len(row) < 2 {
			t.Fatalf("close code row %q", row)
		}
		switch {
		case code == 4004: // resume refused: forget the session and start a new one
			want[code] = "restart"
		case row[1] == "reconnect":
			want[code] = "reconnect"
		case row[1] == "terminal", row[1] == "normal":
			want[code] = "stop"
		default:
			t.Fatalf("close code %d has unknown kind %q", code, row[1])
		}
	}
	// Undocumented codes follow the documented ranges; network failures reconnect.
	for code, action := range map[int]string{4003: "stop", 4099: "stop", 4102: "reconnect", 4199: "reconnect", 1001: "reconnect", 1006: "reconnect", 1011: "reconnect"} {
		want[code] = action
	}
	codes := make([]int, 0, len(want))
	for code := range want {
		codes = append(codes, code)
	}
	arg, _ := json.Marshal(codes)
	var got map[string]string
	if err := json.Unmarshal([]byte(runNode(t, "classify", string(arg))), &got); err != nil {
		t.Fatal(err)
	}
	for code, action := range want {
		if got[strconv.Itoa(code)] != action {
			t.Errorf("close %d: the page would %q, want %q", code, got[strconv.Itoa(code)], action)
		}
	}
}

func TestReconnectBackoffDoublesFromHalfASecondToTenWithJitter(t *testing.T) {
	var got [][2]int
	if err := json.Unmarshal([]byte(runNode(t, "backoff", "")), &got); err != nil {
		t.Fatal(err)
	}
	ceilings := []int{500, 1000, 2000, 4000, 8000, 10000, 10000, 10000}
	for attempt, ceiling := range ceilings {
		low, high := got[attempt][0], got[attempt][1]
		if high != ceiling || low >= high || low < ceiling*6/10 {
			t.Errorf("attempt %d: delays %d..%d ms, want up to %d ms with some jitter below", attempt, low, high, ceiling)
		}
	}
}

func TestGatewayURLFollowsThePageAndPassesTheToken(t *testing.T) {
	locs := `[{"protocol":"https:","host":"chat.example:8443","search":"?x=1&access_token=eyJ.a-b_c"},` +
		`{"protocol":"http:","host":"127.0.0.1:8080","search":""}]`
	var got []string
	if err := json.Unmarshal([]byte(runNode(t, "url", locs)), &got); err != nil {
		t.Fatal(err)
	}
	want := []string{"wss://chat.example:8443/v1/ws?access_token=eyJ.a-b_c", "ws://127.0.0.1:8080/v1/ws"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("gatewayURL #%d = %q, want %q", i, got[i], want[i])
		}
	}
}

type fakeGateway struct {
	mu     sync.Mutex
	starts []map[string]any
	protos []string
	tokens []string
}

// ServeHTTP plays three connections: ready then drain (4100); resume
// refused (4004); ready then "resumed elsewhere" (4005).
func (g *fakeGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"turnstile.v1"}})
	if err != nil {
		return
	}
	defer c.CloseNow()
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	_, data, err := c.Read(ctx)
	if err != nil {
		return
	}
	var start map[string]any
	_ = json.Unmarshal(data, &start)
	g.mu.Lock()
	g.starts = append(g.starts, start)
	g.protos = append(g.protos, c.Subprotocol())
	g.tokens = append(g.tokens, r.URL.Query().Get("access_token"))
	n := len(g.starts)
	g.mu.Unlock()

	write := func(v string) { _ = c.Write(ctx, websocket.MessageText, []byte(v)) }
	switch n {
	case 1:
		write(`{"type":"session.ready","sessionId":"s1","resumeToken":"t1","mode":"text","resumed":false,"turn":0,"model":{"name":"m","offline":true}}`)
		_ = c.Close(4100, "draining")
	case 2:
		write(`{"type":"error","code":"resume_refused","message":"cannot resume","retryable":false}`)
		_ = c.Close(4004, "resume refused")
	case 3:
		write(`{"type":"session.ready","sessionId":"s2","resumeToken":"t2","mode":"text","resumed":false,"turn":0,"model":{"name":"m","offline":true}}`)
		_ = c.Close(4005, "resumed elsewhere")
	default:
		_ = c.Close(4002, "unexpected extra connection")
	}
}

func TestConnectionResumesAfterDrainAndStartsOverWhenResumeIsRefused(t *testing.T) {
	gw := &fakeGateway{}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/ws?access_token=tok"

	var states, messages []string
	var stopped map[string]any
	var stored string
	sc := bufio.NewScanner(strings.NewReader(runNode(t, "connect", url)))
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("harness line %q: %v", sc.Text(), err)
		}
		switch ev["event"] {
		case "status":
			states = append(states, ev["state"].(string))
			if ev["state"] == "stopped" {
				stopped = ev
			}
		case "message":
			messages = append(messages, ev["type"].(string))
		case "stored":
			stored, _ = ev["value"].(string)
		}
	}

	gw.mu.Lock()
	defer gw.mu.Unlock()
	if len(gw.starts) != 3 {
		t.Fatalf("gateway saw %d session.start messages, want 3: %v", len(gw.starts), gw.starts)
	}
	for i, start := range gw.starts {
		if start["type"] != "session.start" {
			t.Errorf("connection %d: first message %v, want session.start", i+1, start)
		}
		if gw.protos[i] != "turnstile.v1" || gw.tokens[i] != "tok" {
			t.Errorf("connection %d: subprotocol %q, token %q", i+1, gw.protos[i], gw.tokens[i])
		}
	}
	if _, ok := gw.starts[0]["resume"]; ok {
		t.Errorf("first connection resumed %v with nothing stored", gw.starts[0]["resume"])
	}
	if resume, _ := gw.starts[1]["resume"].(map[string]any); resume["sessionId"] != "s1" || resume["resumeToken"] != "t1" {
		t.Errorf("after close 4100 the client sent %v, want resume of s1 with t1", gw.starts[1])
	}
	if _, ok := gw.starts[2]["resume"]; ok {
		t.Errorf("after close 4004 the client still resumed: %v", gw.starts[2])
	}
	if got, want := strings.Join(messages, ","), "session.ready,error,session.ready"; got != want {
		t.Errorf("messages passed to the page: %s, want %s", got, want)
	}
	if states[0] != "connecting" || !slices.Contains(states, "reconnecting") || states[len(states)-1] != "stopped" {
		t.Errorf("statuses %v: want connecting first, a reconnect, stopped last", states)
	}
	if stopped["code"] != float64(4005) || stopped["reason"] != "resumed elsewhere" {
		t.Errorf("stopped with %v, want code 4005 and the gateway's reason", stopped)
	}
	if stored != `{"sessionId":"s2","resumeToken":"t2"}` {
		t.Errorf("stored session %q, want the new session s2", stored)
	}
}
