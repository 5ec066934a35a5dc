package gateway_test

// Browser tokens out of URLs: a token offered as the WebSocket subprotocol
// turnstile.auth.<token> beside turnstile.v1 is accepted, the gateway
// answers turnstile.v1 only, and no token (nor the query string of an older
// client's upgrade) ever reaches the gateway's log.

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/server"
)

func TestSubprotocolTokenIsAcceptedAndNeverLogged(t *testing.T) {
	const secret = "subprotocol-test-secret-0123456789abcdef"
	cfg := defaultTestConfig(t)
	cfg.AuthSecret = gateway.Secret(secret)
	log := &browserOutput{}
	g := startGatewayLogging(t, cfg, brains{text: fakegemini.NewScript(textStep("Two days."))}, log)
	mint := func(user string) string {
		tok, err := server.MintToken([]byte(secret), user, 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	dial := func(query string, protocols ...string) (*websocket.Conn, *http.Response, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(g.url, "http")+"/v1/ws"+query,
			&websocket.DialOptions{Subprotocols: protocols})
		if c != nil {
			t.Cleanup(func() { _ = c.CloseNow() })
		}
		return c, resp, err
	}

	good := mint("alice")
	c, _, err := dial("", "turnstile.v1", server.AuthSubprotocolPrefix+good)
	if err != nil {
		t.Fatalf("upgrade with the token as a subprotocol: %v", err)
	}
	if got := c.Subprotocol(); got != "turnstile.v1" {
		t.Fatalf("the gateway answered subprotocol %q, want turnstile.v1 only", got)
	}
	alice := &wsClient{t: t, c: c}
	alice.start(nil)
	if evs := alice.ask("How fast do you ship?"); last(evs).str("reason") != "end_turn" {
		t.Fatalf("a turn on the subprotocol-authenticated session: %v", last(evs))
	}

	// A forged token in the subprotocol is refused before the upgrade.
	forged, err := server.MintToken([]byte(strings.Repeat("x", 40)), "mallory", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, resp, err := dial("", "turnstile.v1", server.AuthSubprotocolPrefix+forged); err == nil || resp == nil ||
		resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("forged subprotocol token: %v (response %v), want 401", err, resp)
	}
	// An older client's query parameter still works, and is not logged either.
	old := mint("bob")
	oc, _, err := dial("?access_token="+old+"&client=old", "turnstile.v1")
	if err != nil {
		t.Fatalf("upgrade with ?access_token=: %v", err)
	}
	(&wsClient{t: t, c: oc}).start(nil)
	testwait.For(t, "both sessions' ready lines in the log", func() bool {
		return strings.Count(log.String(), `"msg":"session ready"`) >= 2
	})

	g.stop() // everything the gateway logs, up to its shutdown
	all := log.String()
	if !strings.Contains(all, `"msg":"connection refused"`) {
		t.Fatalf("the forged token's refusal is not in the log:\n%s", all)
	}
	for name, tok := range map[string]string{"alice's token": good, "the forged token": forged, "bob's token": old} {
		// A JWT's signature is its own; its header is the same for every token.
		sig := tok[strings.LastIndexByte(tok, '.')+1:]
		if strings.Contains(all, sig) {
			t.Errorf("%s appears in the gateway's log", name)
		}
	}
	for _, leak := range []string{"access_token", "client=old", server.AuthSubprotocolPrefix} {
		if strings.Contains(all, leak) {
			t.Errorf("the gateway's log contains %q", leak)
		}
	}
}
