package main

// The client package embedded in a page of another origin, in a real
// headless Chromium: the page (served on a second loopback port) imports
// the modules from the gateway's /client/, gets its token from its own
// backend (an HS256 JWT minted with the gateway's secret, as the README
// shows), connects with auth on and its origin allow-listed, chats, and
// talks through the fake microphone.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/turnstile-gw/turnstile/server"
)

const embedSecret = "embed-test-secret-0123456789abcdef"

// embedPage is the whole page of the embedding site: no build step, the
// client straight from the gateway.
const embedPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>A shop</title></head>
<body>
<h1>A shop with a chat</h1>
<button id="talk" type="button">Talk</button>
<p id="answer"></p>
<script type="module">
import { connect } from "GATEWAY/client/index.js";

const seen = (window.__embed = { status: [], errors: [], answer: "", spoken: "", heard: "", turnsDone: 0, closed: null });
const client = connect({
  url: "WSURL",
  token: async () => {
    const res = await fetch("/api/turnstile-token", { method: "POST" });
    if (!res.ok) throw new Error("token endpoint answered " + res.status);
    return (await res.json()).token;
  },
});
window.__client = client;
client.on("status", (s) => {
  seen.status.push(s.state);
  if (s.state === "closed") seen.closed = s;
});
client.on("text.done", (m) => {
  seen.answer = m.text;
  document.getElementById("answer").textContent = m.text;
});
client.on("transcript.input", (m) => (seen.heard += m.text));
client.on("transcript.output", (m) => (seen.spoken += m.text));
client.on("turn.done", () => seen.turnsDone++);
client.on("error", (m) => seen.errors.push(m.code + ": " + m.message));
client.on("audioError", (e) => seen.errors.push("audio: " + e.message));
document.getElementById("talk").addEventListener("click", () => {
  client.startVoice().catch((err) => seen.errors.push("mic: " + err.message));
});
</script>
</body></html>`

func TestBrowserEmbedsTheClientFromAnotherOrigin(t *testing.T) {
	chromium := findChromium(t)

	// The embedding site: its page and its token endpoint.
	var tokens atomic.Int32
	var gatewayURL string
	site := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			wsURL := "ws" + strings.TrimPrefix(gatewayURL, "http") + "/v1/ws"
			page := strings.NewReplacer("GATEWAY", gatewayURL, "WSURL", wsURL).Replace(embedPage)
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, page)
		case "/api/turnstile-token":
			if r.Method != http.MethodPost {
				http.Error(w, "POST only", http.StatusMethodNotAllowed)
				return
			}
			tok, err := server.MintToken([]byte(embedSecret), "shopper-42", 10*time.Minute)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			tokens.Add(1)
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"token": tok})
		default:
			http.NotFound(w, r)
		}
	}))
	siteOrigin := "http://" + site.Listener.Addr().String()

	t.Setenv("GOOGLE_GENAI_USE_VERTEXAI", "")
	t.Setenv("GOOGLE_GEMINI_BASE_URL", "")
	env := map[string]string{"TURNSTILE_AUTH_SECRET": embedSecret, "TURNSTILE_ALLOWED_ORIGINS": siteOrigin}
	cfg, err := LoadConfig(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	cfg.ShutdownTimeout = 2 * time.Second
	g := startGateway(t, cfg, nil)
	gatewayURL = g.url
	site.Start()
	t.Cleanup(site.Close)
	if siteOrigin == g.url {
		t.Fatal("the site and the gateway share an origin")
	}

	wav := filepath.Join(t.TempDir(), "speech.wav")
	if err := writeSpeechWAV(wav); err != nil {
		t.Fatal(err)
	}
	b := startBrowser(t, chromium, wav)
	b.debugExpr = `JSON.stringify({embed: window.__embed ?? null, page: document.body?.innerText ?? ""}, null, 1)`
	ctx, cancel := context.WithTimeout(b.ctx, browserConversationTimeout)
	defer cancel()

	b.do(ctx, "open the shop's page", chromedp.Navigate(siteOrigin+"/"))
	b.waitFor(ctx, "the client to connect with a token from the shop's backend", `window.__client?.ready === true`)
	if n := tokens.Load(); n < 1 {
		b.fail(fmt.Sprintf("the token endpoint was called %d times", n))
	}

	if sent, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`__client.sendText("How long does shipping take?")`)); err != nil || !sent {
		b.fail(fmt.Sprintf("send a message: sent %v, %v", sent, err))
	}
	b.waitFor(ctx, "the demo model's answer", `__embed.answer.includes("Shipping") && __embed.turnsDone >= 1`)

	b.do(ctx, "press Talk", chromedp.Click(chromedp.ID("talk")))
	b.waitFor(ctx, "voice with the microphone streaming", `__client.voice.mode === "voice" && __client.voice.mic === "on" && __client.voice.framesSent >= 25`)
	b.waitFor(ctx, "the spoken answer, heard and played",
		`__embed.spoken.includes("I heard") && __embed.heard.includes("(speech)") && __embed.turnsDone >= 2 &&
		 __client.voice.playback.played > 0`)

	got, err := chromedp.Run(ctx, chromedp.Evaluate[struct {
		Errors []string
		Status []string
		Played int
		Recvd  int
	}](`({Errors: __embed.errors, Status: __embed.status, Played: __client.voice.playback.played * 2, Recvd: __client.voice.audioBytesReceived})`))
	if err != nil {
		b.fail(fmt.Sprintf("read the page: %v", err))
	}
	t.Logf("embedding page: %+v", got)
	if len(got.Errors) > 0 {
		b.fail(fmt.Sprintf("the page saw errors: %q", got.Errors))
	}
	if strings.Join(got.Status, ",") != "connecting,ready" {
		b.fail(fmt.Sprintf("status changes %v, want connecting then ready (no reconnects)", got.Status))
	}
	if got.Recvd == 0 || got.Played == 0 {
		b.fail(fmt.Sprintf("speech received %d bytes, played %d", got.Recvd, got.Played))
	}
}
