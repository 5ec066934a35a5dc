package server

// The browser tokens' settings: the HS256 secret, the identity provider's
// key set, the claims checked and the bounds of a token's life. Each is a
// row of a table the gateway lifts into its own.

import (
	"fmt"
	"time"

	"github.com/turnstile-gw/turnstile/internal/settings"
)

// Auth is how browser tokens are verified. With neither AuthSecret nor
// AuthJWKSURL every user is anonymous (DevMode).
type Auth struct {
	// AuthSecret verifies HS256 tokens; "": HS256 is refused.
	AuthSecret settings.Secret
	// AuthJWKSURL is a JSON Web Key Set whose keys verify RS256, ES256 and
	// EdDSA tokens; "": those are refused. An https URL, or http on a
	// loopback host (CheckJWKSURL).
	AuthJWKSURL string
	// AuthJWKSRefresh is how often the key set is fetched again; default
	// 15 min. A token signed with a key the set does not have also
	// triggers a fetch, at most one per jwksUnknownKIDEvery.
	AuthJWKSRefresh time.Duration
	// AuthAudience, when set, must be the token's aud: the string itself,
	// or an array containing it. A token without aud is then refused.
	AuthAudience string
	// AuthIssuer, when set, must be the token's iss.
	AuthIssuer string
	// AuthMaxTTL bounds exp − now (plus AuthLeeway); default
	// DefaultAuthMaxTTL.
	AuthMaxTTL time.Duration
	// AuthLeeway tolerates clock differences for exp, nbf and AuthMaxTTL;
	// default DefaultAuthLeeway.
	AuthLeeway time.Duration
}

// DevMode reports whether browser authentication is off (no auth secret and
// no JWKS URL): every user is anonymous. The gateway only allows it on a
// loopback listen address.
func (a Auth) DevMode() bool { return a.AuthSecret == "" && a.AuthJWKSURL == "" }

// MinAuthSecretBytes is the shortest HS256 secret taken.
const MinAuthSecretBytes = 32

// AuthSecretSetting is the row of the HS256 secret.
func AuthSecretSetting() settings.Setting[Auth] {
	return settings.Setting[Auth]{Env: "TURNSTILE_AUTH_SECRET", DefDoc: "unset: dev mode, anonymous users, loopback address only", Secret: true,
		Usage: "HS256 secret for browser tokens, at least 32 bytes (prefer the environment: flags show in ps)",
		Apply: func(a *Auth, v string) error {
			if v != "" && len(v) < MinAuthSecretBytes {
				return fmt.Errorf("must be at least %d bytes", MinAuthSecretBytes)
			}
			a.AuthSecret = settings.Secret(v)
			return nil
		}}
}

// AuthSettings are the rows of the tokens' checks and the key set.
func AuthSettings() []settings.Setting[Auth] {
	return []settings.Setting[Auth]{
		settings.Duration("TURNSTILE_AUTH_MAX_TTL", "24h", "a token whose exp is further away than this is refused", time.Minute,
			func(a *Auth) *time.Duration { return &a.AuthMaxTTL }),
		settings.Duration("TURNSTILE_AUTH_LEEWAY", "30s", "clock difference tolerated with the token issuer (exp, nbf, TURNSTILE_AUTH_MAX_TTL)", time.Nanosecond,
			func(a *Auth) *time.Duration { return &a.AuthLeeway }),
		{Env: "TURNSTILE_AUTH_AUDIENCE", DefDoc: "unset: aud not checked",
			Usage: "the token's aud must be this (or an array containing it); tokens without aud are refused",
			Apply: settings.Plain(func(a *Auth) *string { return &a.AuthAudience })},
		{Env: "TURNSTILE_AUTH_ISSUER", DefDoc: "unset: iss not checked", Usage: "the token's iss must be this",
			Apply: settings.Plain(func(a *Auth) *string { return &a.AuthIssuer })},
		{Env: "TURNSTILE_AUTH_JWKS_URL", DefDoc: "unset: no RS256/ES256/EdDSA tokens",
			Usage: "JSON Web Key Set of an identity provider: RS256, ES256 and EdDSA tokens signed with its keys are accepted (alone, or beside TURNSTILE_AUTH_SECRET); https, or http on loopback",
			Apply: func(a *Auth, v string) error {
				if v == "" {
					return nil
				}
				if err := CheckJWKSURL(v); err != nil {
					return err
				}
				a.AuthJWKSURL = v
				return nil
			}},
		settings.Duration("TURNSTILE_AUTH_JWKS_REFRESH", "15m", "how often the JWKS is fetched again (a token with an unknown kid also triggers a fetch, at most one per 10 s)", time.Second,
			func(a *Auth) *time.Duration { return &a.AuthJWKSRefresh }),
	}
}
