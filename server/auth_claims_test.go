package server

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"

	"github.com/turnstile-gw/turnstile/internal/settings"
)

// fixedNow is the clock of the claim tests: tokens are judged at this instant.
var fixedNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func claimsAuth(t testing.TB, cfg AuthConfig) *Authenticator {
	t.Helper()
	cfg.AuthSecret = settings.Secret(authTestSecret)
	cfg.Now = func() time.Time { return fixedNow }
	a, err := NewAuthenticator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

func TestVerifyChecksAudienceIssuerLeewayAndLifetime(t *testing.T) {
	exp := fixedNow.Add(time.Hour).Unix()
	cfg := AuthConfig{Auth: Auth{AuthAudience: "turnstile", AuthIssuer: "https://idp.example.com", AuthMaxTTL: 2 * time.Hour, AuthLeeway: 30 * time.Second}}
	base := func(edit func(jwt.MapClaims)) string {
		c := jwt.MapClaims{"sub": "alice", "exp": exp, "aud": "turnstile", "iss": "https://idp.example.com"}
		edit(c)
		return signed(t, jwt.SigningMethodHS256, authTestSecret, c)
	}
	keep := func(jwt.MapClaims) {}
	cases := []struct {
		name  string
		token string
		ok    bool
	}{
		{"all claims right", base(keep), true},
		{"aud an array containing ours", base(func(c jwt.MapClaims) { c["aud"] = []string{"billing", "turnstile"} }), true},
		{"aud another service", base(func(c jwt.MapClaims) { c["aud"] = "billing" }), false},
		{"aud an array without ours", base(func(c jwt.MapClaims) { c["aud"] = []string{"billing"} }), false},
		{"aud missing", base(func(c jwt.MapClaims) { delete(c, "aud") }), false},
		{"aud empty", base(func(c jwt.MapClaims) { c["aud"] = "" }), false},
		{"aud a number", base(func(c jwt.MapClaims) { c["aud"] = 7 }), false},
		{"iss another issuer", base(func(c jwt.MapClaims) { c["iss"] = "https://evil.example.com" }), false},
		{"iss missing", base(func(c jwt.MapClaims) { delete(c, "iss") }), false},
		{"expired within the leeway", base(func(c jwt.MapClaims) { c["exp"] = fixedNow.Add(-20 * time.Second).Unix() }), true},
		{"expired beyond the leeway", base(func(c jwt.MapClaims) { c["exp"] = fixedNow.Add(-40 * time.Second).Unix() }), false},
		{"exp at the max TTL", base(func(c jwt.MapClaims) { c["exp"] = fixedNow.Add(2 * time.Hour).Unix() }), true},
		{"exp past the max TTL within the leeway", base(func(c jwt.MapClaims) { c["exp"] = fixedNow.Add(2*time.Hour + 20*time.Second).Unix() }), true},
		{"exp past the max TTL and the leeway", base(func(c jwt.MapClaims) { c["exp"] = fixedNow.Add(2*time.Hour + 40*time.Second).Unix() }), false},
		{"exp a string", base(func(c jwt.MapClaims) { c["exp"] = "1893553445" }), false},
		{"exp missing", base(func(c jwt.MapClaims) { delete(c, "exp") }), false},
		{"exp null", base(func(c jwt.MapClaims) { c["exp"] = nil }), false},
		{"exp fractional", base(func(c jwt.MapClaims) { c["exp"] = float64(exp) + 0.5 }), true},
	}
	a := claimsAuth(t, cfg)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id, err := a.Verify(tc.token)
			if tc.ok {
				if err != nil || id.User != "alice" || id.ExpiresAt.IsZero() {
					t.Fatalf("Verify = (%+v, %v), want alice with an expiry", id, err)
				}
				return
			}
			if !errors.Is(err, ErrBadToken) || id.User != "" {
				t.Fatalf("Verify = (%+v, %v), want ErrBadToken", id, err)
			}
		})
	}
}

func TestVerifyReturnsTheTokensExpiry(t *testing.T) {
	a := claimsAuth(t, AuthConfig{})
	exp := fixedNow.Add(90 * time.Minute)
	id, err := a.Verify(signed(t, jwt.SigningMethodHS256, authTestSecret, jwt.MapClaims{"sub": "bob", "exp": exp.Unix()}))
	if err != nil || id.User != "bob" || !id.ExpiresAt.Equal(exp) {
		t.Fatalf("Verify = (%+v, %v), want bob expiring at %s", id, err, exp)
	}
	if _, err := a.Verify(""); !errors.Is(err, ErrBadToken) {
		t.Fatalf("empty token: %v", err)
	}
}

func TestDefaultMaxTTLRefusesATokenForTwoDays(t *testing.T) {
	a := claimsAuth(t, AuthConfig{})
	long := signed(t, jwt.SigningMethodHS256, authTestSecret, jwt.MapClaims{"sub": "bob", "exp": fixedNow.Add(48 * time.Hour).Unix()})
	if _, err := a.Verify(long); !errors.Is(err, ErrBadToken) || !strings.Contains(err.Error(), "24h0m0s") {
		t.Fatalf("a 48 h token: %v, want refused for the 24 h limit", err)
	}
	day := signed(t, jwt.SigningMethodHS256, authTestSecret, jwt.MapClaims{"sub": "bob", "exp": fixedNow.Add(24 * time.Hour).Unix()})
	if _, err := a.Verify(day); err != nil {
		t.Fatalf("a 24 h token (gateway token's longest): %v", err)
	}
}

func TestMintTokenForCarriesAudienceAndIssuer(t *testing.T) {
	a, err := NewAuthenticator(AuthConfig{Auth: Auth{AuthSecret: settings.Secret(authTestSecret), AuthAudience: "turnstile", AuthIssuer: "me"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	tok, err := MintTokenFor(authTestSecret, "carol", time.Hour, "turnstile", "me")
	if err != nil {
		t.Fatal(err)
	}
	if id, err := a.Verify(tok); err != nil || id.User != "carol" {
		t.Fatalf("Verify = (%+v, %v)", id, err)
	}
	plain, _ := MintToken(authTestSecret, "carol", time.Hour)
	if _, err := a.Verify(plain); !errors.Is(err, ErrBadToken) {
		t.Fatalf("a token without aud and iss: %v, want refused", err)
	}
}

// FuzzVerifyToken feeds arbitrary strings to the token parser: it must
// never panic, and accept nothing it was not given signed.
func FuzzVerifyToken(f *testing.F) {
	a := claimsAuth(f, AuthConfig{Auth: Auth{AuthAudience: "turnstile"}})
	good := signed(f, jwt.SigningMethodHS256, authTestSecret,
		jwt.MapClaims{"sub": "alice", "aud": "turnstile", "exp": fixedNow.Add(time.Hour).Unix()})
	for _, s := range []string{good, good + "x", "a.b.c", "..", "eyJhbGciOiJub25lIn0.e30.", strings.Repeat("a.", 3000)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		id, err := a.Verify(token)
		if err == nil && token != good {
			// Another encoding of the same signed token (base64 padding
			// bits) may pass; it must still name the signed subject.
			if id.User != "alice" {
				t.Fatalf("accepted %q as %+v", token, id)
			}
		}
		if err != nil && (id.User != "" || !errors.Is(err, ErrBadToken)) {
			t.Fatalf("refusal (%+v, %v) is not a clean ErrBadToken", id, err)
		}
	})
}

// FuzzVerifyClaims signs arbitrary claim sets with the right secret: what
// is accepted has a valid subject, our audience and an expiry within the
// allowed window, whatever JSON types the claims have.
func FuzzVerifyClaims(f *testing.F) {
	cfg := AuthConfig{Auth: Auth{AuthAudience: "turnstile", AuthIssuer: "idp", AuthMaxTTL: time.Hour, AuthLeeway: 30 * time.Second}}
	a := claimsAuth(f, cfg)
	exp := fixedNow.Add(time.Minute).Unix()
	for _, s := range []string{
		`{"sub":"alice","aud":"turnstile","iss":"idp","exp":` + jsonInt(exp) + `}`,
		`{"sub":"alice","aud":["x","turnstile"],"iss":"idp","exp":` + jsonInt(exp) + `}`,
		`{"sub":"alice","aud":"turnstile","iss":"idp","exp":"` + jsonInt(exp) + `"}`,
		`{"sub":"alice","aud":"turnstile","iss":"idp","exp":1e308}`,
		`{"sub":"alice","aud":"turnstile","iss":"idp","exp":-1e308,"nbf":1e308}`,
		`{"sub":["alice"],"aud":{},"iss":null,"exp":[]}`,
		`[]`, `null`, `{"sub":"\u0000"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, claims string) {
		tok, err := signRaw(claims)
		if err != nil {
			t.Fatal(err)
		}
		id, err := a.Verify(tok)
		if err != nil {
			if !errors.Is(err, ErrBadToken) || id.User != "" {
				t.Fatalf("refusal (%+v, %v) is not a clean ErrBadToken", id, err)
			}
			return
		}
		if validUser(id.User) != nil || !utf8.ValidString(id.User) {
			t.Fatalf("accepted an invalid subject %q from %s", id.User, claims)
		}
		if ttl := id.ExpiresAt.Sub(fixedNow); ttl < -cfg.AuthLeeway || ttl > cfg.AuthMaxTTL+cfg.AuthLeeway {
			t.Fatalf("accepted an expiry %s away from %s", ttl, claims)
		}
	})
}

func jsonInt(n int64) string { return strconv.FormatInt(n, 10) }

// signRaw signs an arbitrary payload (not necessarily a JSON object) with
// HS256 and authTestSecret.
func signRaw(payload string) (string, error) {
	seg := base64.RawURLEncoding.EncodeToString
	unsigned := seg([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + seg([]byte(payload))
	sig, err := jwt.SigningMethodHS256.Sign(unsigned, authTestSecret)
	if err != nil {
		return "", err
	}
	return unsigned + "." + seg(sig), nil
}
