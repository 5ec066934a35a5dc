package gateway_test

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/server"
	"github.com/turnstile-gw/turnstile/server/jwkstest"
)

func rsClaims(user string) jwt.MapClaims {
	return jwt.MapClaims{"sub": user, "exp": time.Now().Add(time.Hour).Unix()}
}

func bearerOf(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }

func TestJWKSUnreachableAtStartThenUpAndRotating(t *testing.T) {
	idp := jwkstest.Unstarted(t)
	idp.AddKey("k1", "RS256")
	idp.AddKey("k2", "EdDSA")
	idp.Serve("k1")
	cfg := defaultTestConfig(t)
	cfg.AuthJWKSURL = idp.URL()
	g := startGateway(t, cfg, fakegemini.NewScript())

	// The gateway started; it is not ready and refuses the provider's tokens.
	for _, base := range []string{g.url, g.adminURL} {
		if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "jwks") {
			t.Fatalf("%s/readyz before the JWKS answered: %d %s", base, code, body)
		}
	}
	k1 := bearerOf(idp.Sign("k1", rsClaims("alice")))
	if c, r := g.tryUpgrade(k1, ""); c != nil || r.status != http.StatusUnauthorized {
		t.Fatalf("RS256 token before the JWKS answered: %+v, want 401", r)
	}

	idp.Start()
	testwait.For(t, "/readyz once the JWKS answers", func() bool {
		code, _ := get(t, g.url+"/readyz")
		return code == http.StatusOK
	})
	c, r := g.tryUpgrade(k1, "")
	if c == nil {
		t.Fatalf("RS256 token once the JWKS answered: %+v", r)
	}
	c.start(nil)

	// The provider rotates to k2: the unknown kid refreshes the set.
	idp.Serve("k2")
	if c, r := g.tryUpgrade(bearerOf(idp.Sign("k2", rsClaims("bob"))), ""); c == nil {
		t.Fatalf("EdDSA token of the new key: %+v", r)
	}
	if c, r := g.tryUpgrade(bearerOf(idp.Sign("k1", rsClaims("alice"))), ""); c != nil || r.status != http.StatusUnauthorized {
		t.Fatalf("token of the withdrawn key: %+v, want 401", r)
	}
	// HS256 is refused: no secret is configured.
	hs, _ := server.MintToken([]byte(strings.Repeat("k", 32)), "mallory", time.Hour)
	if c, r := g.tryUpgrade(bearerOf(hs), ""); c != nil || r.status != http.StatusUnauthorized {
		t.Fatalf("HS256 token without a secret: %+v, want 401", r)
	}
}

func TestStartupFailureIsPrintedAndExitsNonZero(t *testing.T) {
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte("tools:\n  no_such_tool: {requiresConfirmation: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	code := realMain([]string{"-policy", policy, "-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0"},
		configEnv(map[string]string{}), &bytes.Buffer{}, &stderr)
	if code == 0 {
		t.Fatalf("exit 0 with a policy naming an unknown tool; stderr:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "no_such_tool") || strings.Contains(stderr.String(), "panic") {
		t.Fatalf("exit %d; stderr does not explain the failure:\n%s", code, stderr.String())
	}
	// The plain line, besides the JSON log.
	if !strings.Contains(stderr.String(), "\ngateway: ") && !strings.HasPrefix(stderr.String(), "gateway: ") {
		t.Fatalf("no plain error line:\n%s", stderr.String())
	}
}

func TestListenFailureIsPrintedAndExitsNonZero(t *testing.T) {
	busy := freeAddrHeld(t)
	var stderr bytes.Buffer
	code := realMain([]string{"-addr", "127.0.0.1:0", "-admin-addr", busy}, configEnv(nil), &bytes.Buffer{}, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "listen on TURNSTILE_ADMIN_ADDR="+busy) {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
}

func TestATextCallBudgetAloneStartsWithTheRetrievalDefaultClamped(t *testing.T) {
	p := startProcess(t, "TURNSTILE_TEXT_MAX_CALLS=2")
	if !p.logHas("setting adjusted", "TURNSTILE_TEXT_MAX_CALLS=2: the default TURNSTILE_TEXT_MAX_RETRIEVAL lowered to 2",
		`"text_max_retrieval":2`, `"text_max_calls":2`) {
		t.Fatalf("no clamp warning or clamped budget in the log:\n%s", p.log())
	}
}

func TestGatewayTokenIsAcceptedByTheGatewayItIsMintedFor(t *testing.T) {
	env := map[string]string{"TURNSTILE_AUTH_SECRET": strings.Repeat("k", 32), "TURNSTILE_AUTH_AUDIENCE": "turnstile",
		"TURNSTILE_AUTH_ISSUER": "ops"}
	var out, errOut bytes.Buffer
	if code := realMain([]string{"token", "-user", "alice"}, configEnv(env), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	a, err := server.NewAuthenticator(server.AuthConfig{Auth: server.Auth{
		AuthSecret: gateway.Secret(env["TURNSTILE_AUTH_SECRET"]), AuthAudience: "turnstile", AuthIssuer: "ops"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	id, err := a.Verify(strings.TrimSpace(out.String()))
	if err != nil || id.User != "alice" {
		t.Fatalf("the default token: (%+v, %v)", id, err)
	}
	if left := time.Until(id.ExpiresAt); left > server.DefaultAuthMaxTTL || left < 11*time.Hour {
		t.Fatalf("the default token expires in %s, want 12 h (within the 24 h maximum)", left)
	}
	errOut.Reset()
	if code := realMain([]string{"token", "-user", "alice", "-ttl", "48h"}, configEnv(env), &out, &errOut); code == 0 ||
		!strings.Contains(errOut.String(), "longer than TURNSTILE_AUTH_MAX_TTL") {
		t.Fatalf("a 48 h token: exit %d, %s", code, errOut.String())
	}
}
