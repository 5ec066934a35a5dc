package server

import (
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/turnstile-gw/turnstile/internal/settings"
)

var authTestSecret = []byte("test-secret-test-secret-test-secret-0123")

// signed builds a token with arbitrary claims and method, for cases MintToken refuses to make.
func signed(t testing.TB, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatalf("sign %s: %v", method.Alg(), err)
	}
	return s
}

func validClaims() jwt.MapClaims {
	return jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}
}

func withHeader(tok string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/v1/ws", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	return r
}

// withSubprotocol offers the subprotocols a browser client sends: turnstile.v1 and the token.
func withSubprotocol(tok string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/v1/ws", nil)
	r.Header.Set("Sec-WebSocket-Protocol", "turnstile.v1, "+AuthSubprotocolPrefix+tok)
	return r
}

func withQuery(tok string) *http.Request {
	return httptest.NewRequest(http.MethodGet, "/v1/ws?access_token="+url.QueryEscape(tok), nil)
}

// hsAuth is an Authenticator for HS256 tokens signed with authTestSecret.
func hsAuth(t testing.TB) *Authenticator {
	t.Helper()
	a, err := NewAuthenticator(AuthConfig{Auth: Auth{AuthSecret: settings.Secret(authTestSecret)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

func TestAuthenticateAcceptsValidTokens(t *testing.T) {
	minted, err := MintToken(authTestSecret, "alice", time.Minute)
	if err != nil {
		t.Fatalf("MintToken: %v", err)
	}
	lower := httptest.NewRequest(http.MethodGet, "/v1/ws", nil)
	lower.Header.Set("Authorization", "bearer "+minted)
	headerWins := withQuery("garbage")
	headerWins.Header.Set("Authorization", "Bearer "+minted)
	proxyBasic := withQuery(minted)
	proxyBasic.Header.Set("Authorization", "Basic dXNlcjpwYXNz")

	subBeatsQuery := withQuery("garbage")
	subBeatsQuery.Header.Set("Sec-WebSocket-Protocol", AuthSubprotocolPrefix+minted)
	subSecondHeader := httptest.NewRequest(http.MethodGet, "/v1/ws", nil)
	subSecondHeader.Header.Add("Sec-WebSocket-Protocol", "turnstile.v1")
	subSecondHeader.Header.Add("Sec-WebSocket-Protocol", AuthSubprotocolPrefix+minted)

	zoe := signed(t, jwt.SigningMethodHS256, authTestSecret, jwt.MapClaims{"sub": "Zoë 🎧", "exp": time.Now().Add(time.Hour).Unix()})

	cases := []struct {
		name string
		req  *http.Request
		want string
	}{
		{"header", withHeader(minted), "alice"},
		{"query parameter", withQuery(minted), "alice"},
		{"lowercase scheme", lower, "alice"},
		{"header beats query", headerWins, "alice"},
		{"subprotocol", withSubprotocol(minted), "alice"},
		{"subprotocol beats query", subBeatsQuery, "alice"},
		{"subprotocol in a second header", subSecondHeader, "alice"},
		{"non-bearer header, query used", proxyBasic, "alice"},
		{"unicode subject", withHeader(zoe), "Zoë 🎧"},
	}
	a := hsAuth(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id, err := a.Authenticate(tc.req)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if id.User != tc.want {
				t.Errorf("user = %q, want %q", id.User, tc.want)
			}
			if left := time.Until(id.ExpiresAt); left <= 0 || left > time.Hour {
				t.Errorf("expires in %s, want the token's exp (within the hour)", left)
			}
		})
	}
}

func TestAuthenticateRefusesBadTokens(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	claims := func(edit func(jwt.MapClaims)) jwt.MapClaims {
		c := validClaims()
		edit(c)
		return c
	}
	hs256 := func(c jwt.MapClaims) string { return signed(t, jwt.SigningMethodHS256, authTestSecret, c) }
	empty := httptest.NewRequest(http.MethodGet, "/v1/ws", nil)
	empty.Header.Set("Authorization", "Bearer")

	cases := []struct {
		name string
		req  *http.Request
		want error
	}{
		{"no token", httptest.NewRequest(http.MethodGet, "/v1/ws", nil), ErrNoToken},
		{"only a basic header", func() *http.Request {
			r := httptest.NewRequest(http.MethodGet, "/v1/ws", nil)
			r.Header.Set("Authorization", "Basic dXNlcjpwYXNz")
			return r
		}(), ErrNoToken},
		{"empty bearer", empty, ErrBadToken},
		{"empty query", withQuery(""), ErrBadToken},
		{"empty subprotocol token", withSubprotocol(""), ErrBadToken},
		{"forged subprotocol token", withSubprotocol(signed(t, jwt.SigningMethodHS256,
			[]byte("another-secret-another-secret-another"), validClaims())), ErrBadToken},
		{"garbage", withHeader("not.a.jwt"), ErrBadToken},
		{"oversized", withHeader(strings.Repeat("a", maxTokenBytes+1)), ErrBadToken},
		{"forged with another secret", withHeader(signed(t, jwt.SigningMethodHS256,
			[]byte("another-secret-another-secret-another"), validClaims())), ErrBadToken},
		{"expired", withQuery(hs256(claims(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Hour).Unix() }))), ErrBadToken},
		{"no exp", withHeader(hs256(claims(func(c jwt.MapClaims) { delete(c, "exp") }))), ErrBadToken},
		{"not valid yet", withHeader(hs256(claims(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Hour).Unix() }))), ErrBadToken},
		{"alg none", withHeader(signed(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, validClaims())), ErrBadToken},
		{"RS256", withHeader(signed(t, jwt.SigningMethodRS256, rsaKey, validClaims())), ErrBadToken},
		{"HS512 with the right secret", withHeader(signed(t, jwt.SigningMethodHS512, authTestSecret, validClaims())), ErrBadToken},
		{"no sub", withHeader(hs256(claims(func(c jwt.MapClaims) { delete(c, "sub") }))), ErrBadToken},
		{"empty sub", withHeader(hs256(claims(func(c jwt.MapClaims) { c["sub"] = "" }))), ErrBadToken},
		{"sub too long", withHeader(hs256(claims(func(c jwt.MapClaims) { c["sub"] = strings.Repeat("é", maxSubjectChars+1) }))), ErrBadToken},
		{"sub with control character", withHeader(hs256(claims(func(c jwt.MapClaims) { c["sub"] = "alice\nadmin" }))), ErrBadToken},
		{"sub not a string", withHeader(hs256(claims(func(c jwt.MapClaims) { c["sub"] = 42 }))), ErrBadToken},
		{"exp a numeric string", withHeader(hs256(claims(func(c jwt.MapClaims) { c["exp"] = fmt.Sprint(now.Add(time.Hour).Unix()) }))), ErrBadToken},
		{"exp beyond the max TTL", withHeader(hs256(claims(func(c jwt.MapClaims) { c["exp"] = now.Add(25 * time.Hour).Unix() }))), ErrBadToken},
		{"exp absurdly far", withHeader(hs256(claims(func(c jwt.MapClaims) { c["exp"] = 1e300 }))), ErrBadToken},
	}
	a := hsAuth(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id, err := a.Authenticate(tc.req)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Authenticate = (%+v, %v), want %v", id, err, tc.want)
			}
			if id.User != "" {
				t.Errorf("refused request still got user %q", id.User)
			}
			if tok := tc.req.Header.Get("Authorization") + tc.req.URL.Query().Get("access_token") +
				tc.req.Header.Get("Sec-WebSocket-Protocol"); len(tok) > 20 &&
				strings.Contains(err.Error(), tok[len(tok)-20:]) {
				t.Errorf("error repeats the token: %v", err)
			}
		})
	}
}

func TestAuthenticateMaxLengthSubjectAccepted(t *testing.T) {
	sub := strings.Repeat("é", maxSubjectChars)
	tok := signed(t, jwt.SigningMethodHS256, authTestSecret, jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Minute).Unix()})
	if id, err := hsAuth(t).Authenticate(withHeader(tok)); err != nil || id.User != sub {
		t.Fatalf("Authenticate = (%+v, %v), want the 128-character subject", id, err)
	}
}

func TestDevModeIsAnonymous(t *testing.T) {
	forged := signed(t, jwt.SigningMethodHS256, []byte("whatever"), validClaims())
	for _, secret := range [][]byte{nil, {}} {
		a, err := NewAuthenticator(AuthConfig{Auth: Auth{AuthSecret: settings.Secret(secret)}})
		if err != nil || !a.DevMode() {
			t.Fatalf("NewAuthenticator(%v) is not dev mode: %v", secret, err)
		}
		for _, r := range []*http.Request{httptest.NewRequest(http.MethodGet, "/v1/ws", nil), withHeader(forged)} {
			if id, err := a.Authenticate(r); err != nil || id.User != AnonymousUser || !id.ExpiresAt.IsZero() {
				t.Errorf("dev mode: Authenticate = (%+v, %v), want (%q, nil)", id, err, AnonymousUser)
			}
		}
		if a.Ready() != nil {
			t.Error("dev mode is not ready")
		}
	}
	if hsAuth(t).DevMode() {
		t.Error("an Authenticator with a secret reports dev mode")
	}
}

func TestAuthenticatorKeepsItsOwnCopyOfTheSecret(t *testing.T) {
	secret := append([]byte(nil), authTestSecret...)
	a, err := NewAuthenticator(AuthConfig{Auth: Auth{AuthSecret: settings.Secret(secret)}})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := MintToken(authTestSecret, "bob", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	secret[0] ^= 0xff
	if id, err := a.Authenticate(withHeader(tok)); err != nil || id.User != "bob" {
		t.Fatalf("after caller changed its slice: Authenticate = (%+v, %v)", id, err)
	}
}

func TestMintToken(t *testing.T) {
	tok, err := MintToken(authTestSecret, "carol", 10*time.Minute)
	if err != nil {
		t.Fatalf("MintToken: %v", err)
	}
	var c jwt.RegisteredClaims
	parsed, err := jwt.ParseWithClaims(tok, &c, func(*jwt.Token) (any, error) { return authTestSecret, nil })
	if err != nil {
		t.Fatalf("parse minted token: %v", err)
	}
	if parsed.Method.Alg() != "HS256" || c.Subject != "carol" {
		t.Errorf("alg %s sub %q, want HS256 carol", parsed.Method.Alg(), c.Subject)
	}
	if left := time.Until(c.ExpiresAt.Time); left < 9*time.Minute || left > 10*time.Minute {
		t.Errorf("expires in %s, want about 10m", left)
	}

	for _, tc := range []struct {
		name   string
		secret []byte
		user   string
		ttl    time.Duration
	}{
		{"no secret", nil, "carol", time.Minute},
		{"empty user", authTestSecret, "", time.Minute},
		{"control character in user", authTestSecret, "car\x00ol", time.Minute},
		{"user too long", authTestSecret, strings.Repeat("x", maxSubjectChars+1), time.Minute},
		{"zero ttl", authTestSecret, "carol", 0},
		{"negative ttl", authTestSecret, "carol", -time.Minute},
	} {
		if tok, err := MintToken(tc.secret, tc.user, tc.ttl); err == nil {
			t.Errorf("%s: minted %q, want an error", tc.name, tok)
		}
	}
}
