package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/throttle"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/session"
)

// AnonymousUser is the user of every request in dev mode (no auth secret).
const AnonymousUser = "anon"

// Limits on what a browser may present; both bound work done before the signature is checked.
const (
	maxTokenBytes   = 4096
	maxSubjectChars = 128
)

// Defaults of AuthConfig.
const (
	// DefaultAuthMaxTTL bounds how far in the future a token's exp may be: a stolen token is
	// useful for at most this long.
	DefaultAuthMaxTTL = 24 * time.Hour
	// DefaultAuthLeeway tolerates clock differences between the token issuer and this gateway.
	DefaultAuthLeeway = 30 * time.Second
)

var (
	// ErrNoToken means the request carried no token at all (answer 401 and ask the user to sign in).
	ErrNoToken = errors.New("auth: no token")
	// ErrBadToken means a token was presented but is not acceptable: malformed, forged, expired,
	// too long-lived, for another audience or issuer, signed with a refused algorithm or an
	// unknown key, or with a missing or invalid subject.
	ErrBadToken = errors.New("auth: invalid token")
)

// AuthConfig says which browser tokens are accepted. With neither Secret nor JWKSURL the
// Authenticator is in dev mode.
type AuthConfig struct {
	// Auth is the settings: the secret, the key set, the claims checked
	// and the bounds of a token's life (settings_auth.go).
	Auth
	// Now is the clock tokens are judged by; default the system clock.
	Now func() time.Time
	// Log receives the key set's fetch failures (throttled); default: discarded.
	Log *slog.Logger
	// Metrics counts the key set's failed fetches
	// (turnstile_jwks_refresh_failures_total); nil: not counted.
	Metrics *metrics.Metrics
	// ToolClaims names the token claims forwarded to tools
	// (TURNSTILE_TOOL_CLAIMS, each checked with tools.ClaimName); a
	// token's value that a header cannot carry is dropped with a log line
	// (auth_claims.go).
	ToolClaims []string
	// ContextClaims names the token claims the model is told as facts
	// about the user (TURNSTILE_CONTEXT_CLAIMS), by the same rules.
	ContextClaims []string
}

// Authenticator verifies browser tokens before the WebSocket upgrade and when a session
// refreshes its token: JWTs whose `sub` names the user and whose numeric `exp` is required and
// not too far away. It is safe for concurrent use; Close stops its key-set refreshes.
type Authenticator struct {
	cfg     AuthConfig
	secret  []byte         // cfg.AuthSecret's bytes, for the key function
	parser  *jwt.Parser    // nil in dev mode
	keys    *jwks          // nil without JWKSURL
	dropped throttle.Keyed // per claim name: values that could not be forwarded
}

// NewAuthenticator returns an Authenticator for cfg, and starts fetching its key set when it has
// one: an unreachable key set does not fail here (its tokens are refused and Ready reports it
// until it answers). In dev mode every request is AnonymousUser, and the caller is responsible
// for only allowing that on a loopback listen address.
func NewAuthenticator(cfg AuthConfig) (*Authenticator, error) {
	if cfg.AuthMaxTTL <= 0 {
		cfg.AuthMaxTTL = DefaultAuthMaxTTL
	}
	if cfg.AuthLeeway <= 0 {
		cfg.AuthLeeway = DefaultAuthLeeway
	}
	if cfg.Now == nil {
		cfg.Now = clock.Wall.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	a := &Authenticator{cfg: cfg, secret: []byte(cfg.AuthSecret)}
	if a.DevMode() {
		return a, nil
	}
	// The allow-list is what stops `alg: none` and key confusion: only the algorithms of the
	// configured keys are verified, and key picks a key of the token's own kind.
	var methods []string
	if cfg.AuthSecret != "" {
		methods = append(methods, jwt.SigningMethodHS256.Alg())
	}
	if cfg.AuthJWKSURL != "" {
		var failed func(string)
		if cfg.Metrics != nil {
			failed = cfg.Metrics.JWKSRefreshFailure
		}
		keys, err := startJWKS(cfg.AuthJWKSURL, cfg.AuthJWKSRefresh, cfg.Log, cfg.Now, failed)
		if err != nil {
			return nil, err
		}
		a.keys = keys
		methods = append(methods, jwt.SigningMethodRS256.Alg(), jwt.SigningMethodES256.Alg(), jwt.SigningMethodEdDSA.Alg())
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(methods),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(cfg.AuthLeeway),
		jwt.WithTimeFunc(cfg.Now),
	}
	if cfg.AuthAudience != "" {
		opts = append(opts, jwt.WithAudience(cfg.AuthAudience))
	}
	if cfg.AuthIssuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.AuthIssuer))
	}
	a.parser = jwt.NewParser(opts...)
	return a, nil
}

// Close stops the key set's refreshes. The Authenticator must not be used afterwards.
func (a *Authenticator) Close() {
	if a.keys != nil {
		a.keys.close()
	}
}

// DevMode reports whether the Authenticator accepts everyone as AnonymousUser.
func (a *Authenticator) DevMode() bool { return a.cfg.DevMode() }

// Ready reports an error while a configured key set has never been fetched: tokens signed with
// its keys are refused until it is.
func (a *Authenticator) Ready() error {
	if a.keys != nil && !a.keys.ready() {
		return errors.New("auth: the JWKS has not been fetched yet")
	}
	return nil
}

// Degraded is why the key set's last fetch could not be used in full (a reason of
// turnstile_jwks_refresh_failures_total), "" when it could or there is no key set. A degraded
// Authenticator is still ready: the keys fetched before stay in use.
func (a *Authenticator) Degraded() string {
	if a.keys == nil {
		return ""
	}
	return a.keys.degradedReason()
}

// Authenticate returns who a request is made by. The token comes from an
// `Authorization: Bearer <token>` header or, since browsers cannot set headers on a WebSocket,
// from a subprotocol turnstile.auth.<token> offered beside turnstile.v1, or from the
// `access_token` query parameter (older clients). Errors wrap ErrNoToken or ErrBadToken and never
// contain the token.
func (a *Authenticator) Authenticate(r *http.Request) (session.Identity, error) {
	if a.DevMode() {
		return session.Identity{User: AnonymousUser, Anonymous: true}, nil
	}
	raw, err := tokenFrom(r)
	if err != nil {
		return session.Identity{}, err
	}
	return a.Verify(raw)
}

// Verify checks a token as Authenticate does, for a session refreshing its token with an `auth`
// message: the identity has the token's user and expiry. In dev mode every token (even an empty
// one) is AnonymousUser without an expiry. Errors wrap ErrBadToken and never contain the token.
func (a *Authenticator) Verify(token string) (session.Identity, error) {
	if a.DevMode() {
		return session.Identity{User: AnonymousUser, Anonymous: true}, nil
	}
	switch {
	case token == "":
		return session.Identity{}, fmt.Errorf("%w: empty token", ErrBadToken)
	case len(token) > maxTokenBytes:
		return session.Identity{}, fmt.Errorf("%w: longer than %d bytes", ErrBadToken, maxTokenBytes)
	}
	// MapClaims, not RegisteredClaims: its exp must be a JSON number (RegisteredClaims also takes
	// a numeric string), its sub a string, and its aud a string or an array of strings.
	claims := jwt.MapClaims{}
	if _, err := a.parser.ParseWithClaims(token, claims, a.key); err != nil {
		return session.Identity{}, fmt.Errorf("%w: %w", ErrBadToken, err)
	}
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil {
		return session.Identity{}, fmt.Errorf("%w: exp: missing or not a number", ErrBadToken)
	}
	if ttl := exp.Sub(a.cfg.Now()); ttl > a.cfg.AuthMaxTTL+a.cfg.AuthLeeway {
		return session.Identity{}, fmt.Errorf("%w: exp: %s away, more than the %s allowed", ErrBadToken,
			ttl.Truncate(time.Second), a.cfg.AuthMaxTTL)
	}
	sub, _ := claims["sub"].(string)
	if err := validUser(sub); err != nil {
		return session.Identity{}, fmt.Errorf("%w: sub: %w", ErrBadToken, err)
	}
	profile, allowed := profileClaims(claims)
	return session.Identity{User: sub, ExpiresAt: exp.Time, Claims: a.toolClaims(claims),
		Facts: a.contextClaims(claims), Profile: profile, Profiles: allowed}, nil
}

// key picks the key of the token's own kind: the secret for HMAC, the key set for the others.
// WithValidMethods has already refused algorithms without a configured key. A token with a
// `crit` header is refused: it names extensions the verifier must understand (RFC 7515
// §4.1.11), and this gateway understands none.
func (a *Authenticator) key(t *jwt.Token) (any, error) {
	if _, ok := t.Header["crit"]; ok {
		return nil, errors.New("crit header: the token requires extensions this gateway does not understand")
	}
	switch t.Method.(type) {
	case *jwt.SigningMethodHMAC:
		if len(a.secret) == 0 {
			return nil, errors.New("HS256 tokens are not accepted")
		}
		return a.secret, nil
	case *jwt.SigningMethodRSA, *jwt.SigningMethodECDSA, *jwt.SigningMethodEd25519:
		if a.keys == nil {
			return nil, fmt.Errorf("%s tokens are not accepted", t.Method.Alg())
		}
		return a.keys.key(t)
	}
	return nil, fmt.Errorf("unexpected signing method %s", t.Method.Alg())
}

// AuthSubprotocolPrefix marks the WebSocket subprotocol that carries a browser's token
// ("turnstile.auth.<token>"), offered beside protocol.Subprotocol: browsers cannot set headers
// on a WebSocket, and unlike a query parameter a subprotocol is not written to proxies' access
// logs. The gateway never selects it (it answers protocol.Subprotocol).
const AuthSubprotocolPrefix = "turnstile.auth."

// tokenFrom extracts the raw token: a Bearer header wins, then a subprotocol
// turnstile.auth.<token>, then the access_token query parameter (kept for older clients; proxies
// log it). Any other Authorization scheme (for example a proxy's Basic credentials) is not ours
// and is ignored.
func tokenFrom(r *http.Request) (string, error) {
	raw, found := "", false
	scheme, rest, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if strings.EqualFold(scheme, "Bearer") {
		raw, found = strings.TrimSpace(rest), true
	} else if tok, ok := subprotocolToken(r.Header); ok {
		raw, found = tok, true
	} else if q := r.URL.Query(); q.Has("access_token") {
		raw, found = q.Get("access_token"), true
	}
	switch {
	case !found:
		return "", ErrNoToken
	case raw == "":
		return "", fmt.Errorf("%w: empty token", ErrBadToken)
	case len(raw) > maxTokenBytes:
		return "", fmt.Errorf("%w: longer than %d bytes", ErrBadToken, maxTokenBytes)
	}
	return raw, nil
}

// subprotocolToken finds turnstile.auth.<token> among the offered subprotocols (any number of
// Sec-WebSocket-Protocol headers, each a comma-separated list).
func subprotocolToken(h http.Header) (string, bool) {
	for _, v := range h.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(v, ",") {
			if tok, ok := strings.CutPrefix(strings.TrimSpace(p), AuthSubprotocolPrefix); ok {
				return tok, true
			}
		}
	}
	return "", false
}

// validUser checks a user name: 1 to 128 characters of valid UTF-8, no control characters.
func validUser(user string) error {
	switch n := utf8.RuneCountInString(user); {
	case n == 0:
		return errors.New("missing or empty")
	case n > maxSubjectChars:
		return fmt.Errorf("longer than %d characters", maxSubjectChars)
	case !utf8.ValidString(user):
		return errors.New("not valid UTF-8")
	case strings.ContainsFunc(user, unicode.IsControl):
		return errors.New("contains control characters")
	}
	return nil
}

// MintToken signs an HS256 token for user that expires after ttl; `gateway token` uses it to hand
// out development tokens. The user must be a valid subject (1..128 characters, no control characters).
func MintToken(secret []byte, user string, ttl time.Duration) (string, error) {
	return MintTokenFor(secret, user, ttl, "", "")
}

// MintTokenFor is MintToken with an audience and an issuer ("" leaves the claim out), for a
// gateway that checks them (TURNSTILE_AUTH_AUDIENCE, TURNSTILE_AUTH_ISSUER).
func MintTokenFor(secret []byte, user string, ttl time.Duration, audience, issuer string) (string, error) {
	if len(secret) == 0 {
		return "", errors.New("mint token: no secret")
	}
	if err := validUser(user); err != nil {
		return "", fmt.Errorf("mint token: user: %w", err)
	}
	if ttl <= 0 {
		return "", fmt.Errorf("mint token: ttl %s: must be positive", ttl)
	}
	now := clock.Wall.Now()
	claims := jwt.RegisteredClaims{
		Subject:   user,
		Issuer:    issuer,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}
	if audience != "" {
		claims.Audience = jwt.ClaimStrings{audience}
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
	if err != nil {
		return "", fmt.Errorf("mint token: sign: %w", err)
	}
	return s, nil
}
