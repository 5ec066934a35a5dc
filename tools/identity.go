package tools

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Identity is who a tool call is made for and which action it is, as the
// gateway vouches for it to an HTTP or MCP tool's service: the token's
// subject, the session, the call, the action's idempotency key and the
// forwarded token claims. A tool whose manifest (or MCP server entry) says
// "identity": false is told none of it.
type Identity struct {
	User           string
	Session        string
	Call           string
	IdempotencyKey string
	Claims         Claims
}

// The headers an HTTP tool request carries (docs/tools.md, "What a tool
// learns about a call"). A manifest may not set them itself.
const (
	HeaderUser           = "Turnstile-User"
	HeaderSession        = "Turnstile-Session"
	HeaderCall           = "Turnstile-Call"
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderClaimPrefix + the claim's name carries one forwarded claim.
	HeaderClaimPrefix = "Turnstile-Claim-"
	// HeaderSignature is internal/signature.Header.
	HeaderSignature = "Turnstile-Signature"
)

// The _meta keys of an MCP tools/call.
const (
	MetaUser           = "turnstile/user"
	MetaSession        = "turnstile/session"
	MetaCall           = "turnstile/call"
	MetaIdempotencyKey = "turnstile/idempotencyKey"
	// MetaClaims holds the forwarded claims as an object, name → value.
	MetaClaims = "turnstile/claims"
)

// ReservedHeader reports whether name is one of the identity headers, which
// the gateway sets and a manifest's headers may not.
func ReservedHeader(name string) bool {
	c := http.CanonicalHeaderKey(name)
	switch c {
	case HeaderUser, HeaderSession, HeaderCall, HeaderIdempotencyKey, HeaderSignature:
		return true
	}
	return strings.HasPrefix(c, HeaderClaimPrefix)
}

// SetHeaders sets the identity headers on h. Empty facts, and values a
// header cannot carry (control characters: the gateway's own values never
// hold one, claims are checked when the token is read), are left out.
func (id Identity) SetHeaders(h http.Header) {
	for k, v := range map[string]string{HeaderUser: id.User, HeaderSession: id.Session, HeaderCall: id.Call,
		HeaderIdempotencyKey: id.IdempotencyKey} {
		if headerSafe(v) {
			h.Set(k, v)
		}
	}
	for name, v := range id.Claims {
		if claimName.MatchString(name) && headerSafe(v) {
			h.Set(HeaderClaimPrefix+name, v)
		}
	}
}

func headerSafe(v string) bool { return v != "" && !strings.ContainsFunc(v, unicode.IsControl) }

// Meta returns the identity as MCP _meta entries; empty facts are left out.
func (id Identity) Meta() map[string]any {
	m := map[string]any{}
	for k, v := range map[string]string{MetaUser: id.User, MetaSession: id.Session, MetaCall: id.Call,
		MetaIdempotencyKey: id.IdempotencyKey} {
		if v != "" {
			m[k] = v
		}
	}
	if len(id.Claims) > 0 {
		claims := make(map[string]any, len(id.Claims))
		for k, v := range id.Claims {
			claims[k] = v
		}
		m[MetaClaims] = claims
	}
	return m
}

// Claims are forwarded token claims by name. Only checked names
// (ClaimName) and values (ClaimValue) belong in it: they go into header
// names and values as they are.
type Claims map[string]string

// Names returns the claims' names, sorted.
func (c Claims) Names() []string { return slices.Sorted(maps.Keys(c)) }

// MaxClaimValue bounds a forwarded claim's value, in bytes.
const MaxClaimValue = 256

var claimName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// ClaimName checks the name of a claim to forward (TURNSTILE_TOOL_CLAIMS):
// it becomes part of a header name, so letters, digits, - and _ only, at
// most 64, starting with a letter or digit.
func ClaimName(name string) error {
	if !claimName.MatchString(name) {
		return fmt.Errorf("claim name %q: use letters, digits, - and _ (at most 64, starting with a letter or digit)", Clip(name, 70))
	}
	return nil
}

// ErrClaimValue is the error of a claim value that cannot be forwarded.
var ErrClaimValue = errors.New("claim value cannot be forwarded")

// ClaimValue turns a token claim (as decoded from JSON) into the string a
// tool is sent: a string as it is, a number or a boolean as its JSON text.
// Objects, arrays, null, control characters (CR and LF included: no header
// injection) and values over MaxClaimValue bytes cannot be forwarded.
func ClaimValue(v any) (string, error) {
	var s string
	switch v := v.(type) {
	case string:
		s = v
	case bool:
		s = strconv.FormatBool(v)
	case float64:
		s = strconv.FormatFloat(v, 'f', -1, 64)
	case interface{ String() string }: // json.Number
		s = v.String()
	default:
		return "", fmt.Errorf("%w: only strings, numbers and booleans are", ErrClaimValue)
	}
	switch {
	case len(s) > MaxClaimValue:
		return "", fmt.Errorf("%w: longer than %d bytes", ErrClaimValue, MaxClaimValue)
	case strings.ContainsFunc(s, unicode.IsControl):
		return "", fmt.Errorf("%w: it holds a control character (a line break, say)", ErrClaimValue)
	}
	return s, nil
}
