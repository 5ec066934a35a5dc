package gateway_test

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
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/metrics"
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

const seen = (window.__embed = { status: [], errors: [], answer: "", spoken: "", heard: "", turnsDone: 0, closed: null,
  audio: [], audioNonSilent: false });
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
// What a visualiser or a recorder does: keep the model's speech.
client.on("audio", (buf) => {
  seen.audio.push(buf);
  seen.audioNonSilent ||= new Int16Array(buf).some((v) => v !== 0);
});
client.on("audioError", (e) => seen.errors.push("audio: " + e.message));
document.getElementById("talk").addEventListener("click", () => {
  client.startVoice().catch((err) => seen.errors.push("mic: " + err.message));
});
</script>
</body></html>`

// embedSite is the embedding site: its page and its token endpoint, which
// mints a token for the gateway at *gatewayURL and keeps each one it hands
// out. Start it once the gateway's URL is known.
type embedSite struct {
	srv    *httptest.Server
	origin string
	mu     sync.Mutex
	tokens []string
}

func newEmbedSite(t *testing.T, gatewayURL *string) *embedSite {
	t.Helper()
	e := &embedSite{}
	e.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			wsURL := "ws" + strings.TrimPrefix(*gatewayURL, "http") + "/v1/ws"
			page := strings.NewReplacer("GATEWAY", *gatewayURL, "WSURL", wsURL).Replace(embedPage)
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
			e.mu.Lock()
			e.tokens = append(e.tokens, tok)
			e.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"token": tok})
		default:
			http.NotFound(w, r)
		}
	}))
	e.origin = "http://" + e.srv.Listener.Addr().String()
	t.Cleanup(e.srv.Close)
	return e
}

// minted is every token handed out so far.
func (e *embedSite) minted() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.tokens...)
}

// startEmbedBrowser starts Chromium for an embedding page (its microphone
// plays speech) and gives the conversation's context, which ends with the
// test.
func startEmbedBrowser(t *testing.T, chromium string) (*chromiumTab, context.Context) {
	t.Helper()
	wav := filepath.Join(t.TempDir(), "speech.wav")
	if err := writeSpeechWAV(wav); err != nil {
		t.Fatal(err)
	}
	b := startBrowser(t, chromium, wav)
	b.debugExpr = `JSON.stringify({embed: window.__embed ?? null, page: document.body?.innerText ?? ""}, null, 1)`
	ctx, cancel := context.WithTimeout(b.ctx, browserConversationTimeout)
	t.Cleanup(cancel)
	return b, ctx
}

// embedGateway starts a gateway with auth on whose allowed origin is
// allowed, logging to log (nil: nowhere).
func embedGateway(t *testing.T, allowed string, log io.Writer) *testGateway {
	t.Helper()
	t.Setenv("GOOGLE_GENAI_USE_VERTEXAI", "")
	t.Setenv("GOOGLE_GEMINI_BASE_URL", "")
	env := map[string]string{"TURNSTILE_AUTH_SECRET": embedSecret, "TURNSTILE_ALLOWED_ORIGINS": allowed}
	cfg, err := gateway.LoadConfig(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	cfg.ShutdownTimeout = 2 * time.Second
	return startGatewayLogging(t, cfg, brains{}, log)
}

func TestBrowserEmbedsTheClientFromAnotherOrigin(t *testing.T) {
	chromium := findChromium(t)
	var gatewayURL string
	site := newEmbedSite(t, &gatewayURL)
	gwLog := &browserOutput{}
	g := embedGateway(t, site.origin, gwLog)
	gatewayURL = g.url
	site.srv.Start()
	siteOrigin := site.origin
	if siteOrigin == g.url {
		t.Fatal("the site and the gateway share an origin")
	}

	b, ctx := startEmbedBrowser(t, chromium)

	b.do(ctx, "open the shop's page", chromedp.Navigate(siteOrigin+"/"))
	b.waitFor(ctx, "the client to connect with a token from the shop's backend", `window.__client?.ready === true`)
	if n := len(site.minted()); n < 1 {
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
		Errors    []string
		Status    []string
		Played    int
		Recvd     int
		Kept      int
		NonSilent bool
	}](`({Errors: __embed.errors, Status: __embed.status, Played: __client.voice.playback.played * 2,
		Recvd: __client.voice.audioBytesReceived, Kept: __embed.audio.reduce((n, b) => n + b.byteLength, 0),
		NonSilent: __embed.audioNonSilent})`))
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
	// The audio event delivers the speech it promises, to keep: every byte
	// received, still there after playback, and not silence.
	if got.Kept != got.Recvd || !got.NonSilent {
		b.fail(fmt.Sprintf("the audio listener kept %d of %d bytes received (non-silent: %v)", got.Kept, got.Recvd, got.NonSilent))
	}
	// The token went as a subprotocol: not in the gateway's log, which
	// shows no query string either.
	g.stop()
	log := gwLog.String()
	for _, tok := range site.minted() {
		if strings.Contains(log, tok[strings.LastIndexByte(tok, '.')+1:]) {
			t.Fatal("a token the page used appears in the gateway's log")
		}
	}
	if strings.Contains(log, "access_token") || !strings.Contains(log, `"msg":"session ready"`) {
		t.Fatalf("the gateway's log has a query token, or no session:\n%s", log)
	}
}

// A page on an origin the gateway does not allow: the browser cannot see
// the 403, so the client stops after three attempts with a terminal error
// that names the likely causes, and asks its backend for no more tokens.
func TestBrowserClientOnARefusedOriginStopsAfterThreeAttempts(t *testing.T) {
	chromium := findChromium(t)
	var gatewayURL string
	site := newEmbedSite(t, &gatewayURL)
	g := embedGateway(t, "https://shop.example.com", nil)
	gatewayURL = g.url
	site.srv.Start()

	b, ctx := startEmbedBrowser(t, chromium)
	b.do(ctx, "open the page of a site the gateway does not allow", chromedp.Navigate(site.origin+"/"))
	b.waitFor(ctx, "the client to give up", `window.__embed?.closed !== null && window.__embed?.closed !== undefined`)

	got, err := chromedp.Run(ctx, chromedp.Evaluate[struct {
		Errors []string
		By     string
		Status []string
	}](`({Errors: __embed.errors, By: __embed.closed.by, Status: __embed.status})`))
	if err != nil {
		b.fail(fmt.Sprintf("read the page: %v", err))
	}
	t.Logf("page: %+v", got)
	if len(got.Errors) != 1 || !strings.HasPrefix(got.Errors[0], "unreachable_or_refused: ") ||
		!strings.Contains(got.Errors[0], "Origin") || !strings.Contains(got.Errors[0], "token") {
		b.fail(fmt.Sprintf("errors %q, want one unreachable_or_refused naming the Origin and the token", got.Errors))
	}
	if got.By != "unreachable" {
		b.fail(fmt.Sprintf("closed by %q, want unreachable", got.By))
	}
	// Three attempts, each refused by the Origin check, each with a token.
	if n := g.refusals(metrics.RefusedOrigin); n != 3 {
		b.fail(fmt.Sprintf("origin refusals = %v, want 3", n))
	}
	if n := len(site.minted()); n != 3 {
		b.fail(fmt.Sprintf("the page minted %d tokens, want 3 (none after it stopped)", n))
	}
}
