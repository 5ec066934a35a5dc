package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/internal/settings"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/server/jwkstest"
)

func jwksAuth(t *testing.T, cfg AuthConfig) *Authenticator {
	t.Helper()
	a, err := NewAuthenticator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

func userClaims(user string) jwt.MapClaims {
	return jwt.MapClaims{"sub": user, "exp": time.Now().Add(time.Hour).Unix()}
}

func TestJWKSAcceptsRSAECAndEdDSAKeysBesideTheSecret(t *testing.T) {
	idp := jwkstest.New(t)
	for kid, alg := range map[string]string{"rsa": "RS256", "ec": "ES256", "ed": "EdDSA"} {
		idp.AddKey(kid, alg)
	}
	idp.Serve("rsa", "ec", "ed")
	a := jwksAuth(t, AuthConfig{Auth: Auth{AuthJWKSURL: idp.URL(), AuthSecret: settings.Secret(authTestSecret)}})
	testwait.For(t, "the key set's first fetch", func() bool { return a.Ready() == nil })
	for _, kid := range []string{"rsa", "ec", "ed"} {
		if id, err := a.Verify(idp.Sign(kid, userClaims("alice-"+kid))); err != nil || id.User != "alice-"+kid {
			t.Errorf("%s token: (%+v, %v)", kid, id, err)
		}
	}
	hs := signed(t, jwt.SigningMethodHS256, authTestSecret, userClaims("bob"))
	if id, err := a.Verify(hs); err != nil || id.User != "bob" {
		t.Errorf("HS256 token beside the key set: (%+v, %v)", id, err)
	}
	// A token whose header names an RSA key but that is signed HS256 with
	// some other secret gets no key-confusion help: HMAC uses our secret.
	forged := jwt.NewWithClaims(jwt.SigningMethodHS256, userClaims("mallory"))
	forged.Header["kid"] = "rsa"
	raw, _ := forged.SignedString([]byte("not-our-secret-not-our-secret-!!"))
	if _, err := a.Verify(raw); !errors.Is(err, ErrBadToken) {
		t.Errorf("forged HS256 token with an RSA kid: %v", err)
	}
}

func TestJWKSWithoutSecretRefusesHS256(t *testing.T) {
	idp := jwkstest.New(t)
	idp.AddKey("rsa", "RS256")
	idp.Serve("rsa")
	a := jwksAuth(t, AuthConfig{Auth: Auth{AuthJWKSURL: idp.URL()}})
	if a.DevMode() {
		t.Fatal("a key set alone is dev mode")
	}
	testwait.For(t, "the first fetch", func() bool { return a.Ready() == nil })
	hs := signed(t, jwt.SigningMethodHS256, authTestSecret, userClaims("bob"))
	if _, err := a.Verify(hs); !errors.Is(err, ErrBadToken) {
		t.Fatalf("HS256 without a secret: %v", err)
	}
}

func TestJWKSRotation(t *testing.T) {
	idp := jwkstest.New(t)
	idp.AddKey("old", "RS256")
	idp.AddKey("new", "ES256")
	idp.Serve("old")
	a := jwksAuth(t, AuthConfig{Auth: Auth{AuthJWKSURL: idp.URL()}})
	testwait.For(t, "the first fetch", func() bool { return a.Ready() == nil })
	oldTok := idp.Sign("old", userClaims("alice"))
	if _, err := a.Verify(oldTok); err != nil {
		t.Fatalf("old key before rotation: %v", err)
	}

	idp.Serve("new") // the provider rotates: the old key is withdrawn
	before := idp.Fetches()
	if id, err := a.Verify(idp.Sign("new", userClaims("alice"))); err != nil || id.User != "alice" {
		t.Fatalf("new key after rotation: (%+v, %v); the unknown kid should have refreshed the set", id, err)
	}
	if idp.Fetches() != before+1 {
		t.Fatalf("%d fetches for the unknown kid, want 1", idp.Fetches()-before)
	}
	if _, err := a.Verify(oldTok); !errors.Is(err, ErrBadToken) {
		t.Fatalf("old key after rotation: %v, want refused", err)
	}
	// Unknown kids do not make the gateway hammer the provider.
	for range 20 {
		_, _ = a.Verify(idp.Sign("old", userClaims("mallory")))
	}
	if n := idp.Fetches() - before; n > 1 {
		t.Fatalf("%d fetches for 21 unknown kids within seconds, want them rate-limited to 1", n)
	}
}

func TestJWKSUnreachableAtStartRefusesItsTokensUntilItAnswers(t *testing.T) {
	idp := jwkstest.Unstarted(t)
	idp.AddKey("rsa", "RS256")
	idp.Serve("rsa")
	a := jwksAuth(t, AuthConfig{Auth: Auth{AuthJWKSURL: idp.URL()}})
	tok := idp.Sign("rsa", userClaims("alice"))
	if a.Ready() == nil {
		t.Fatal("ready before the key set was ever fetched")
	}
	if _, err := a.Verify(tok); !errors.Is(err, ErrBadToken) {
		t.Fatalf("token before the first fetch: %v, want refused", err)
	}
	idp.Start()
	testwait.For(t, "the key set to be fetched once it answers", func() bool { return a.Ready() == nil })
	if id, err := a.Verify(tok); err != nil || id.User != "alice" {
		t.Fatalf("token after the first fetch: (%+v, %v)", id, err)
	}
}

func TestJWKSThatFailsLaterKeepsItsKeys(t *testing.T) {
	idp := jwkstest.New(t)
	idp.AddKey("rsa", "RS256")
	idp.Serve("rsa")
	a := jwksAuth(t, AuthConfig{Auth: Auth{AuthJWKSURL: idp.URL(), AuthJWKSRefresh: 20 * time.Millisecond}})
	testwait.For(t, "the first fetch", func() bool { return a.Ready() == nil })
	idp.SetDown(true)
	failedFrom := idp.Requests()
	testwait.For(t, "several failed refreshes", func() bool { return idp.Requests() >= failedFrom+3 })
	if id, err := a.Verify(idp.Sign("rsa", userClaims("alice"))); err != nil || id.User != "alice" || a.Ready() != nil {
		t.Fatalf("after failed refreshes: (%+v, %v), ready %v", id, err, a.Ready())
	}
}

func TestCheckJWKSURL(t *testing.T) {
	for u, ok := range map[string]bool{
		"https://idp.example.com/.well-known/jwks.json": true,
		"http://127.0.0.1:8081/jwks":                    true,
		"http://localhost/jwks":                         true,
		"http://[::1]:9000/jwks":                        true,
		"http://idp.example.com/jwks":                   false,
		"http://10.0.0.1/jwks":                          false,
		"ftp://idp.example.com/jwks":                    false,
		"https://user:pw@idp.example.com/jwks":          false,
		"/jwks":                                         false,
	} {
		if err := CheckJWKSURL(u); (err == nil) != ok {
			t.Errorf("CheckJWKSURL(%q) = %v, want ok=%v", u, err, ok)
		}
	}
	if _, err := NewAuthenticator(AuthConfig{Auth: Auth{AuthJWKSURL: "http://idp.example.com/jwks"}}); err == nil {
		t.Error("NewAuthenticator took a plain-http non-loopback key set")
	}
}

// jwksClock is the test's clock of the unknown-kid limit, moved by hand.
type jwksClock struct{ offset atomic.Int64 }

func (c *jwksClock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *jwksClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// A key set that answers `{}`, garbage, or a set with a malformed key is a
// failed fetch: the keys fetched before keep verifying tokens at the edge,
// each failure is counted by reason, /readyz stays 200 and says degraded,
// and a malformed key, once fixed, verifies within the unknown-kid retry.
func TestJWKSThatAnswersNoUsableKeyKeepsTheLastGoodKeys(t *testing.T) {
	idp := jwkstest.New(t)
	idp.AddKey("good", "RS256")
	idp.AddKey("late", "ES256")
	idp.Serve("good")
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, metrics.Build{})
	clock := &jwksClock{}
	a := jwksAuth(t, AuthConfig{Auth: Auth{AuthJWKSURL: idp.URL()}, Metrics: m, Now: clock.now})
	testwait.For(t, "the first fetch", func() bool { return a.Ready() == nil })
	s := New(Config{}, Deps{Auth: a, Store: pingOK{}, Metrics: m, Gatherer: reg, Log: slog.New(slog.DiscardHandler)})
	t.Cleanup(s.Close)
	edge := httptest.NewServer(s.Handler())
	t.Cleanup(edge.Close)

	upgrade := func(tok string) int { return wsStatus(t, edge, tok) }
	readyz := func() (int, map[string]any) {
		t.Helper()
		resp, err := edge.Client().Get(edge.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, body
	}
	failures := func(reason string) float64 {
		return testutil.ToFloat64(m.JWKSRefreshFailures.WithLabelValues(reason))
	}
	good := idp.Sign("good", userClaims("alice"))
	if code := upgrade(good); code == http.StatusUnauthorized {
		t.Fatal("a token of the fetched key refused")
	}
	if code, body := readyz(); code != 200 || body["degraded"] != nil {
		t.Fatalf("/readyz after a clean fetch: %d %v", code, body)
	}

	// Each step's answer is fetched by a token naming a kid the set does
	// not have, one retry window after the last.
	for _, step := range []struct {
		name, body, reason string
	}{
		{"an empty object", `{}`, metrics.JWKSNoUsableKey},
		{"an empty key list", `{"keys":[]}`, metrics.JWKSNoUsableKey},
		{"garbage", `<html>maintenance</html>`, metrics.JWKSDecode},
	} {
		idp.Answer(step.body)
		before := failures(step.reason)
		clock.advance(jwksUnknownKIDEvery)
		if code := upgrade(idp.Sign("late", userClaims("mallory"))); code != http.StatusUnauthorized {
			t.Fatalf("%s: a token of a key not served got HTTP %d", step.name, code)
		}
		if got := failures(step.reason); got < before+1 {
			t.Errorf("%s: turnstile_jwks_refresh_failures_total{reason=%q} went %v → %v, want it counted", step.name, step.reason, before, got)
		}
		if code := upgrade(good); code == http.StatusUnauthorized {
			t.Fatalf("after %s: a token of the last good key refused", step.name)
		}
		if code, body := readyz(); code != 200 || fmt.Sprint(body["degraded"]) != fmt.Sprintf("map[jwks:%s]", step.reason) {
			t.Fatalf("/readyz after %s: %d %v, want 200 degraded jwks:%s", step.name, code, body, step.reason)
		}
	}

	// The provider serves the good key beside a malformed new one: the
	// good key stays, the malformed one is counted and its kid refused.
	idp.Answer("")
	idp.Serve("good", "late")
	idp.Malformed("late", true)
	late := idp.Sign("late", userClaims("bob"))
	clock.advance(jwksUnknownKIDEvery)
	if code := upgrade(late); code != http.StatusUnauthorized {
		t.Fatalf("a token of a malformed key got HTTP %d", code)
	}
	if got := failures(metrics.JWKSMalformedKey); got < 1 {
		t.Errorf("malformed_key failures: %v, want it counted", got)
	}
	if code := upgrade(good); code == http.StatusUnauthorized {
		t.Fatal("beside a malformed key: a token of the good key refused")
	}
	if _, body := readyz(); fmt.Sprint(body["degraded"]) != "map[jwks:malformed_key]" {
		t.Fatalf("/readyz with a malformed key: %v", body)
	}

	// Fixed at the provider: one retry window later its kid verifies, and
	// the set is no longer degraded.
	idp.Malformed("late", false)
	clock.advance(jwksUnknownKIDEvery)
	if code := upgrade(late); code == http.StatusUnauthorized {
		t.Fatal("the fixed key's token refused one unknown-kid retry after the fix")
	}
	if code, body := readyz(); code != 200 || body["degraded"] != nil {
		t.Fatalf("/readyz after the fix: %d %v", code, body)
	}
}

// A key the gateway already has that the provider starts serving malformed
// keeps its earlier version: its tokens go on verifying.
func TestJWKSMalformedKeyKeepsItsEarlierVersion(t *testing.T) {
	idp := jwkstest.New(t)
	idp.AddKey("a", "EdDSA")
	idp.AddKey("b", "RS256")
	idp.AddKey("unserved", "ES256")
	idp.Serve("a", "b")
	clock := &jwksClock{}
	a := jwksAuth(t, AuthConfig{Auth: Auth{AuthJWKSURL: idp.URL()}, Now: clock.now})
	testwait.For(t, "the first fetch", func() bool { return a.Ready() == nil })

	idp.Malformed("a", true)
	before := idp.Fetches()
	clock.advance(jwksUnknownKIDEvery)
	if _, err := a.Verify(idp.Sign("unserved", userClaims("mallory"))); !errors.Is(err, ErrBadToken) {
		t.Fatalf("a token of a key not served: %v", err)
	}
	if idp.Fetches() == before || a.Degraded() != metrics.JWKSMalformedKey {
		t.Fatalf("no fetch of the set with the malformed key (fetches %d → %d, degraded %q)", before, idp.Fetches(), a.Degraded())
	}
	for _, kid := range []string{"a", "b"} {
		if id, err := a.Verify(idp.Sign(kid, userClaims("alice"))); err != nil || id.User != "alice" {
			t.Errorf("kid %s once the set serves a malformed: (%+v, %v)", kid, id, err)
		}
	}
}
