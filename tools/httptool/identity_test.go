package httptool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/internal/signature"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tools/httptool"
)

// capture is a service that records what each request carried.
type capture struct {
	mu     sync.Mutex
	header []http.Header
	body   [][]byte
}

func (c *capture) server(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.header = append(c.header, r.Header.Clone())
		c.body = append(c.body, b)
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"T-1"}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func (c *capture) last(t *testing.T) (http.Header, []byte) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.header) == 0 {
		t.Fatal("the service got no request")
	}
	return c.header[len(c.header)-1], c.body[len(c.body)-1]
}

var identityCall = tools.Call{ID: "call-7", SessionID: "s_abc", UserID: "alice@example.com", Mode: "text",
	IdempotencyKey: "8d0f5e4c-1b2a-8c3d-9e4f-0a1b2c3d4e5f", Claims: tools.Claims{"tenant": "acme", "plan": "pro"}}

func TestHTTPToolRequestCarriesTheUserSessionCallKeyClaimsAndAValidSignature(t *testing.T) {
	var c capture
	srv := c.server(t)
	secret := []byte(strings.Repeat("s", 32))
	at := time.Unix(1_900_000_000, 0)
	for _, method := range []string{"POST", "GET"} {
		t.Run(method, func(t *testing.T) {
			tool := load(t, manifest(fmt.Sprintf(`{"url": %q, "method": %q}`, srv.URL+"/tickets", method)),
				httptool.Options{SigningSecret: secret, Now: func() time.Time { return at }})
			call := identityCall
			call.Args = json.RawMessage(`{"title":"Noisy grinder"}`)
			if env := tool.Handler.Handle(context.Background(), call); !env.OK {
				t.Fatalf("call failed: %+v", env.Error)
			}
			h, body := c.last(t)
			want := map[string]string{"Turnstile-User": "alice@example.com", "Turnstile-Session": "s_abc",
				"Turnstile-Call": "call-7", "Idempotency-Key": identityCall.IdempotencyKey,
				"Turnstile-Claim-Tenant": "acme", "Turnstile-Claim-Plan": "pro"}
			for k, v := range want {
				if got := h.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if err := signature.Verify(secret, h.Get("Turnstile-Signature"), body, at.Add(time.Minute), signature.DefaultTolerance); err != nil {
				t.Errorf("signature %q over %q: %v", h.Get("Turnstile-Signature"), body, err)
			}
			if err := signature.Verify(secret, h.Get("Turnstile-Signature"), []byte(`{"title":"Other"}`), at, signature.DefaultTolerance); err == nil {
				t.Error("the signature also verifies another body")
			}
		})
	}
}

func TestHTTPToolWithIdentityFalseSendsNoneOfIt(t *testing.T) {
	var c capture
	srv := c.server(t)
	tool := load(t, manifest(fmt.Sprintf(`{"url": %q, "identity": false, "headers": {"X-Api-Key": "k"}}`, srv.URL)),
		httptool.Options{SigningSecret: []byte(strings.Repeat("s", 32))})
	call := identityCall
	call.Args = json.RawMessage(`{"title":"x"}`)
	if env := tool.Handler.Handle(context.Background(), call); !env.OK {
		t.Fatalf("call failed: %+v", env.Error)
	}
	h, _ := c.last(t)
	for k := range h {
		if strings.HasPrefix(k, "Turnstile-") || k == "Idempotency-Key" {
			t.Errorf("a third-party API got %s", k)
		}
	}
	if h.Get("X-Api-Key") != "k" {
		t.Errorf("the manifest's own header is missing")
	}
}

func TestHTTPToolUnsignedWithoutASecretAndLeavesOutUnsafeValues(t *testing.T) {
	var c capture
	srv := c.server(t)
	tool := load(t, manifest(fmt.Sprintf(`{"url": %q}`, srv.URL)), httptool.Options{})
	call := identityCall
	call.Claims = tools.Claims{"tenant": "acme\r\nX-Evil: 1", "plan": "pro"}
	call.Args = json.RawMessage(`{"title":"x"}`)
	if env := tool.Handler.Handle(context.Background(), call); !env.OK {
		t.Fatalf("call failed: %+v", env.Error)
	}
	h, _ := c.last(t)
	if h.Get("Turnstile-Signature") != "" {
		t.Error("signed without a secret")
	}
	if h.Get("X-Evil") != "" || h.Get("Turnstile-Claim-Tenant") != "" {
		t.Errorf("a claim with a line break reached the service: %v", h)
	}
	if h.Get("Turnstile-Claim-Plan") != "pro" || h.Get("Turnstile-User") != "alice@example.com" {
		t.Errorf("the safe facts are missing: %v", h)
	}
}

func TestManifestMayNotSetTheIdentityHeaders(t *testing.T) {
	for _, name := range []string{"Turnstile-User", "idempotency-key", "Turnstile-Claim-Tenant", "Turnstile-Signature"} {
		_, err := httptool.Load(folder(manifest(fmt.Sprintf(`{"url": "https://api.example.com", "headers": {%q: "x"}}`, name))),
			"test dir", httptool.Options{})
		if err == nil || !strings.Contains(err.Error(), "who is calling") {
			t.Errorf("header %s: err %v, want a refusal", name, err)
		}
	}
}
