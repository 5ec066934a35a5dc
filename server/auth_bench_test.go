package server

import (
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/turnstile-gw/turnstile/internal/settings"
	"github.com/turnstile-gw/turnstile/server/jwkstest"
)

// The cost of checking a token before an upgrade (and on each in-session
// refresh), by signature kind.
func BenchmarkVerify(b *testing.B) {
	idp := jwkstest.New(b)
	for kid, alg := range map[string]string{"rs": "RS256", "es": "ES256", "ed": "EdDSA"} {
		idp.AddKey(kid, alg)
	}
	idp.Serve("rs", "es", "ed")
	a, err := NewAuthenticator(AuthConfig{Auth: Auth{AuthSecret: settings.Secret(authTestSecret), AuthJWKSURL: idp.URL(), AuthAudience: "turnstile"}})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	for a.Ready() != nil {
		time.Sleep(5 * time.Millisecond)
	}
	claims := func() jwt.MapClaims {
		return jwt.MapClaims{"sub": "alice", "aud": "turnstile", "exp": time.Now().Add(time.Hour).Unix()}
	}
	tokens := map[string]string{
		"HS256": signed(b, jwt.SigningMethodHS256, authTestSecret, claims()),
		"RS256": idp.Sign("rs", claims()),
		"ES256": idp.Sign("es", claims()),
		"EdDSA": idp.Sign("ed", claims()),
	}
	for _, name := range []string{"HS256", "RS256", "ES256", "EdDSA"} {
		tok := tokens[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Verify(tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
