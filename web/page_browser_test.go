package web

// The demo page in a real headless Chromium against a scripted gateway:
// what the protocol additions look like on the page (the session's tools,
// a tool call whose arguments come later, a tool's result fields, and
// "Load earlier" for a truncated history).

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"
)

func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Chromium found (scripts/install-test-deps installs it)")
	}
	t.Skip("no Chromium found")
	return ""
}

// scriptedGateway plays one resumed session and answers one history request.
type scriptedGateway struct {
	mu      sync.Mutex
	history []map[string]any // the history requests received
	fail    []string
}

func (g *scriptedGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"turnstile.v1"}})
	if err != nil {
		return
	}
	defer c.CloseNow()
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	write := func(v any) {
		b, _ := json.Marshal(v)
		_ = c.Write(ctx, websocket.MessageText, b)
	}
	failf := func(s string) {
		g.mu.Lock()
		g.fail = append(g.fail, s)
		g.mu.Unlock()
	}
	if _, data, err := c.Read(ctx); err != nil || !strings.Contains(string(data), `"session.start"`) {
		failf("first message " + string(data))
		return
	}
	write(map[string]any{"type": "session.ready", "sessionId": "s1", "resumeToken": "t1", "mode": "text", "resumed": true,
		"registryVersion": "r", "turn": 12, "model": map[string]any{"name": "demo", "offline": false},
		"history": []any{
			map[string]any{"role": "user", "text": "question eleven", "turn": 11},
			map[string]any{"role": "model", "text": "answer eleven", "turn": 11},
			map[string]any{"role": "user", "text": "question twelve", "turn": 12},
			map[string]any{"role": "model", "text": "answer twelve", "turn": 12},
		},
		"historyTruncated": true,
		"tools": []any{
			map[string]any{"name": "kb_search", "modes": []string{"text", "voice"}, "requiresConfirmation": false, "terminal": false},
			map[string]any{"name": "refund_order", "modes": []string{"text"}, "requiresConfirmation": true, "terminal": true},
		},
	})
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		var msg map[string]any
		_ = json.Unmarshal(data, &msg)
		switch msg["type"] {
		case "text":
			if msg["text"] == "talk" {
				// A mode switch carries the new mode's tools.
				write(map[string]any{"type": "mode", "mode": "voice", "reason": "start_voice_session", "tools": []any{
					map[string]any{"name": "kb_search", "modes": []string{"text", "voice"}, "requiresConfirmation": false, "terminal": false},
				}})
				continue
			}
			write(map[string]any{"type": "turn.start", "turn": 13, "text": msg["text"]})
			write(map[string]any{"type": "tool.call", "turn": 13, "id": "c1", "name": "kb_search"})
			write(map[string]any{"type": "tool.args", "turn": 13, "id": "c1", "args": map[string]any{"query": "shipping times"}})
			write(map[string]any{"type": "tool.result", "turn": 13, "id": "c1", "name": "kb_search", "ok": true, "refused": false,
				"durationMs": 3, "result": map[string]any{"count": 2}})
			write(map[string]any{"type": "text.done", "turn": 13, "text": "Two to three days."})
			write(map[string]any{"type": "turn.done", "turn": 13, "reason": "end_turn"})
		case "history":
			g.mu.Lock()
			g.history = append(g.history, msg)
			g.mu.Unlock()
			write(map[string]any{"type": "history", "more": false, "entries": []any{
				map[string]any{"role": "user", "text": "question nine", "turn": 9},
				map[string]any{"role": "model", "text": "answer nine", "turn": 9},
				map[string]any{"role": "user", "text": "question ten", "turn": 10},
				map[string]any{"role": "model", "text": "answer ten", "turn": 10},
			}})
		case "ping":
			write(map[string]any{"type": "pong"})
		}
	}
}

func TestPageShowsToolsStreamedArgsResultsAndEarlierHistory(t *testing.T) {
	chromium := findChromium(t)
	gw := &scriptedGateway{}
	mux := http.NewServeMux()
	mux.Handle("/v1/ws", gw)
	mux.Handle("/", Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(chromium), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1024, 768)}
	for _, f := range []string{"headless", "no-sandbox", "disable-gpu", "no-first-run", "no-default-browser-check",
		"disable-background-networking", "disable-component-update", "disable-sync", "disable-extensions", "disable-breakpad"} {
		opts = append(opts, chromedp.Flag(f, true))
	}
	opts = append(opts, chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		if err := chromedp.Cancel(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("close the browser: %v", err)
		}
		cancelTab()
		cancelAlloc()
	})
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	wait := func(what, cond string) {
		t.Helper()
		poll := chromedp.Poll[bool](cond, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(15*time.Second))
		if _, err := chromedp.Run(ctx, poll); err != nil {
			text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
			t.Fatalf("waiting for %s: %v\npage:\n%s", what, err, text)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatalf("open the page: %v", err)
	}
	wait("the resumed session with its tools and a Load earlier button",
		`(() => {
			const tools = document.getElementById("tools");
			const names = [...tools.querySelectorAll("li .tool-name")].map((n) => n.textContent).join(",");
			return !tools.hidden && names === "kb_search,refund_order" &&
				tools.querySelector("summary").textContent === "Tools (2)" &&
				tools.textContent.includes("asks you first") && tools.textContent.includes("ends the turn") &&
				!document.getElementById("earlier").hidden &&
				document.querySelector('[data-turn="11"] .msg.user').textContent.includes("question eleven");
		})()`)

	if err := chromedp.Do(ctx, chromedp.SendKeys("#message", "How long does shipping take?"), chromedp.Click("#send")); err != nil {
		t.Fatalf("send a message: %v", err)
	}
	wait("the tool row with the arguments that came after the call, and its result",
		`(() => {
			const row = document.querySelector('[data-turn="13"] .tool');
			return row !== null && row.dataset.state === "ok" &&
				row.querySelector(".tool-args").textContent === 'query: "shipping times"' &&
				row.querySelector(".tool-result")?.textContent === "→ count: 2" &&
				document.querySelector('[data-turn="13"] .msg.model').textContent.includes("Two to three days.");
		})()`)

	if err := chromedp.Do(ctx, chromedp.Click("#earlier")); err != nil {
		t.Fatalf("click Load earlier: %v", err)
	}
	wait("the earlier turns above the others, and no more button",
		`(() => {
			const turns = [...document.querySelectorAll("#transcript li[data-turn]")].map((li) => li.dataset.turn).join(",");
			return turns === "9,10,11,12,13" && document.getElementById("earlier").hidden &&
				document.querySelector('[data-turn="9"] .msg.model').textContent.includes("answer nine");
		})()`)

	if err := chromedp.Do(ctx, chromedp.SendKeys("#message", "talk"), chromedp.Click("#send")); err != nil {
		t.Fatalf("send a message: %v", err)
	}
	wait("the voice mode's tools after the mode switch",
		`(() => {
			const tools = document.getElementById("tools");
			const names = [...tools.querySelectorAll("li .tool-name")].map((n) => n.textContent).join(",");
			return !tools.hidden && names === "kb_search" && tools.querySelector("summary").textContent === "Tools (1)";
		})()`)

	gw.mu.Lock()
	defer gw.mu.Unlock()
	for _, f := range gw.fail {
		t.Error(f)
	}
	if len(gw.history) != 1 || gw.history[0]["before"] != float64(11) || gw.history[0]["limit"] != float64(50) {
		t.Errorf("history requests %v, want one before turn 11 for 50 entries", gw.history)
	}
}
