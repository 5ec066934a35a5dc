package server

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"

	"github.com/turnstile-gw/turnstile/session"
)

// AnonymousUser is the user of every request in dev mode (no auth secret).
const AnonymousUser = "anon"

// Limits on what a browser may present; both bound work done before the signature is checked.
const (
	maxTokenBytes   = 4096
	maxSubjectChars = 128
	// clockSkew tolerates small clock differences between the token issuer and this gateway.
	clockSkew = 30 * time.Second
)

var (
	// ErrNoToken means the request carried no token at all (answer 401 and ask the user to sign in).
	ErrNoToken = errors.New("auth: no token")
	// ErrBadToken means a token was presented but is not acceptable: malformed, forged, expired,
	// signed with a refused algorithm, or with a missing or invalid subject.
	ErrBadToken = errors.New("auth: invalid token")
)

// Authenticator verifies browser tokens before the WebSocket upgrade: HS256 JWTs whose `sub`
// claim names the user and whose `exp` claim is required. It is safe for concurrent use.
type Authenticator struct {
	secret []byte      // empty = dev mode
	parser *jwt.Parser // nil in dev mode
}

// NewAuthenticator returns an Authenticator for tokens signed with secret. A nil or empty secret
// is dev mode: every request is AnonymousUser, and the caller is responsible for only allowing
// that on a loopback listen address. The secret is copied.
func NewAuthenticator(secret []byte) *Authenticator {
	if len(secret) == 0 {
		return &Authenticator{}
	}
	return &Authenticator{
		secret: bytes.Clone(secret),
		parser: jwt.NewParser(
			// The allow-list is what stops `alg: none` and RS/HS confusion: nothing but HS256 is verified.
			jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
			jwt.WithExpirationRequired(),
			jwt.WithLeeway(clockSkew),
		),
	}
}

// DevMode reports whether the Authenticator accepts everyone as AnonymousUser.
func (a *Authenticator) DevMode() bool { return len(a.secret) == 0 }

// Authenticate returns the user a request is made by. The token comes from an
// `Authorization: Bearer <token>` header or, since browsers cannot set headers on a WebSocket,
// from the `access_token` query parameter. Errors wrap ErrNoToken or ErrBadToken and never
// contain the token.
func (a *Authenticator) Authenticate(r *http.Request) (user string, err error) {
	id, err := a.identify(r)
	return id.User, err
}

// identify is Authenticate with the token's expiry: the Identity a session
// is served for.
func (a *Authenticator) identify(r *http.Request) (session.Identity, error) {
	if a.DevMode() {
		return session.Identity{User: AnonymousUser, Anonymous: true}, nil
	}
	raw, err := tokenFrom(r)
	if err != nil {
		return session.Identity{}, err
	}
	return a.Verify(raw)
}

// Verify checks a raw token (as Authenticate does) and returns whom it
// names and when it expires; sessions use it for the fresh tokens of auth
// messages. In dev mode every token is the anonymous user.
func (a *Authenticator) Verify(raw string) (session.Identity, error) {
	if a.DevMode() {
		return session.Identity{User: AnonymousUser, Anonymous: true}, nil
	}
	if raw == "" || len(raw) > maxTokenBytes {
		return session.Identity{}, fmt.Errorf("%w: empty or longer than %d bytes", ErrBadToken, maxTokenBytes)
	}
	var claims jwt.RegisteredClaims
	if _, err := a.parser.ParseWithClaims(raw, &claims, a.key); err != nil {
		return session.Identity{}, fmt.Errorf("%w: %w", ErrBadToken, err)
	}
	if err := validUser(claims.Subject); err != nil {
		return session.Identity{}, fmt.Errorf("%w: sub: %w", ErrBadToken, err)
	}
	id := session.Identity{User: claims.Subject}
	if claims.ExpiresAt != nil {
		id.ExpiresAt = claims.ExpiresAt.Time
	}
	return id, nil
}

func (a *Authenticator) key(t *jwt.Token) (any, error) {
	// WithValidMethods has already refused other algorithms; this keeps the key tied to HMAC
	// even if the parser options change.
	if _, ok := t.Method.(*jwt.SigningMethodHMAC); !ok {
		return nil, fmt.Errorf("unexpected signing method %s", t.Method.Alg())
	}
	return a.secret, nil
}

// tokenFrom extracts the raw token. A Bearer header wins; any other Authorization scheme (for
// example a proxy's Basic credentials) is not ours and is ignored.
func tokenFrom(r *http.Request) (string, error) {
	raw, found := "", false
	scheme, rest, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if strings.EqualFold(scheme, "Bearer") {
		raw, found = strings.TrimSpace(rest), true
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
	if len(secret) == 0 {
		return "", errors.New("mint token: no secret")
	}
	if err := validUser(user); err != nil {
		return "", fmt.Errorf("mint token: user: %w", err)
	}
	if ttl <= 0 {
		return "", fmt.Errorf("mint token: ttl %s: must be positive", ttl)
	}
	now := time.Now()
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Subject:   user,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	})
	s, err := tok.SignedString(secret)
	if err != nil {
		return "", fmt.Errorf("mint token: sign: %w", err)
	}
	return s, nil
}
