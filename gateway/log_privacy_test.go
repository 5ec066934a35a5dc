package gateway_test

// What the gateway writes to its log about requests: never a token, never a
// query string; behind a trusted proxy, the client it forwarded.

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/server"
)

const privacySecret = "privacy-test-secret-0123456789abcdef"

// get sends a GET to the process with headers and returns the status.
func (p *procGateway) get(path string, header http.Header) int {
	p.t.Helper()
	req, err := http.NewRequest(http.MethodGet, p.url+path, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestTokensAndQueryStringsNeverReachTheLog(t *testing.T) {
	p := startProcess(t, "TURNSTILE_AUTH_SECRET="+privacySecret, "TURNSTILE_LOG_LEVEL=debug")
	token, err := server.MintToken([]byte(privacySecret), "alice", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	const marker = "qmarker-7c1e"
	query := "/v1/ws?access_token=" + token + "&ref=" + marker

	// A session whose token rode in the query string: it talks and ends.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(p.url, "http")+query,
		&websocket.DialOptions{Subprotocols: []string{"turnstile.v1"}})
	if err != nil {
		t.Fatal(err)
	}
	ws := &wsClient{t: t, c: c}
	ws.start(nil)
	if done := ofType(ws.ask("How long does shipping take?"), "text.done"); len(done) != 1 {
		t.Fatalf("no answer: %v", done)
	}
	_ = c.Close(websocket.StatusNormalClosure, "")

	// Refusals with the token in the query: a bad token, a foreign Origin,
	// and a request to /v1/ws that is no upgrade.
	if code := p.get("/v1/ws?access_token=not."+marker+".jwt", nil); code != http.StatusUnauthorized {
		t.Fatalf("bad token in the query: %d, want 401", code)
	}
	if code := p.get(query, http.Header{"Origin": {"https://evil.example"}}); code != http.StatusForbidden {
		t.Fatalf("foreign origin: %d, want 403", code)
	}
	if code := p.get(query, nil); code == http.StatusSwitchingProtocols || code < 400 {
		t.Fatalf("plain GET of /v1/ws: %d, want a refusal", code)
	}
	p.get("/?access_token="+token+"&ref="+marker, nil)

	p.stop()
	l := p.log()
	if !strings.Contains(l, `"msg":"session ready"`) || !strings.Contains(l, `"msg":"connection refused"`) {
		t.Fatalf("the log does not show the session and the refusals it should:\n%s", l)
	}
	for _, leak := range []string{token, marker, "access_token", strings.Split(token, ".")[2]} {
		if strings.Contains(l, leak) {
			t.Errorf("the log holds %q:\n%s", leak, l)
		}
	}
}

func TestForwardedClientShowsInRefusalLogOnlyFromATrustedProxy(t *testing.T) {
	for _, c := range []struct {
		name, trusted, want, notWant string
	}{
		{"trusted", "127.0.0.1/32", `"client_ip":"203.0.113.9"`, `"client_ip":"127.0.0.1"`},
		{"untrusted", "10.0.0.0/8", `"client_ip":"127.0.0.1"`, "203.0.113.9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := startProcess(t, "TURNSTILE_AUTH_SECRET="+privacySecret, "TURNSTILE_TRUSTED_PROXIES="+c.trusted)
			if code := p.get("/v1/ws", http.Header{"X-Forwarded-For": {"203.0.113.9"}}); code != http.StatusUnauthorized {
				t.Fatalf("no token: %d, want 401", code)
			}
			p.stop()
			var line string
			for l := range strings.Lines(p.log()) {
				if strings.Contains(l, `"msg":"connection refused"`) {
					line = l
				}
			}
			if !strings.Contains(line, c.want) || strings.Contains(line, c.notWant) {
				t.Fatalf("refusal line %q: want %s, not %s", line, c.want, c.notWant)
			}
		})
	}
}

func TestStartupLogShowsDurationsAsGoDurations(t *testing.T) {
	p := startProcess(t, "TURNSTILE_SHUTDOWN_TIMEOUT=20s")
	p.stop()
	if !p.logHas(`"shutdown_timeout":"20s"`, `"idle_timeout":"1m30s"`, `"deadline":"20s"`) {
		t.Fatalf("durations not written as Go durations:\n%s", p.log())
	}
}
