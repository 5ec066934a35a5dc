package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/MicahParks/jwkset"

	"github.com/turnstile-gw/turnstile/metrics"
)

// fetchError is a fetch of the key set that failed, with its reason
// (metrics.JWKSRefreshFailureReasons).
type fetchError struct {
	reason string
	err    error
}

func (e *fetchError) Error() string { return e.reason + ": " + e.err.Error() }
func (e *fetchError) Unwrap() error { return e.err }

// fetched is one answer of the key set: the keys the gateway verifies
// with, and the kids of the keys it could not read.
type fetched struct {
	keys      []jwkset.JWK
	malformed []badKey
	ignored   int // well-formed keys of kinds the gateway does not verify with
}

// get fetches and parses the key set. An answer without a single usable
// key is an error (metrics.JWKSNoUsableKey): replacing the set with it
// would refuse every token.
func (j *jwks) get(ctx context.Context) (fetched, error) {
	ctx, cancel := context.WithTimeout(ctx, jwksHTTPTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.url, nil)
	if err != nil {
		return fetched{}, &fetchError{metrics.JWKSUnreachable, err}
	}
	resp, err := j.client.Do(req)
	if err != nil {
		return fetched{}, &fetchError{metrics.JWKSUnreachable, err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fetched{}, &fetchError{metrics.JWKSStatus, fmt.Errorf("HTTP %d", resp.StatusCode)}
	}
	var set jwkset.JWKSMarshal
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		return fetched{}, &fetchError{metrics.JWKSDecode, fmt.Errorf("not a JSON key set: %w", err)}
	}
	f := parseKeys(set.Keys)
	if len(f.keys) == 0 {
		return f, &fetchError{metrics.JWKSNoUsableKey, fmt.Errorf("%d keys, none usable (malformed: %s; of kinds not verified with: %d)",
			len(set.Keys), f.malformedText(), f.ignored)}
	}
	return f, nil
}

// parseKeys keeps the keys the gateway verifies tokens with: RSA, EC P-256
// and Ed25519 keys whose use, if any, is sig.
func parseKeys(all []jwkset.JWKMarshal) fetched {
	var f fetched
	for _, m := range all {
		k, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{Private: true}, jwkset.JWKValidateOptions{})
		switch {
		case errors.Is(err, jwkset.ErrUnsupportedKey):
			f.ignored++
		case err != nil:
			f.malformed = append(f.malformed, badKey{m.KID, err})
		case !usableKey(k):
			f.ignored++
		default:
			f.keys = append(f.keys, k)
		}
	}
	return f
}

func usableKey(k jwkset.JWK) bool {
	if use := k.Marshal().USE; use != "" && use != jwkset.UseSig {
		return false
	}
	switch key := k.Key().(type) {
	case *rsa.PublicKey, *rsa.PrivateKey, ed25519.PublicKey, ed25519.PrivateKey:
		return true
	case *ecdsa.PublicKey:
		return key.Curve == elliptic.P256()
	case *ecdsa.PrivateKey:
		return key.Curve == elliptic.P256()
	}
	return false
}

// badKey is a key of the set that could not be read.
type badKey struct {
	kid string
	err error
}

// malformedText lists the malformed keys for a log line.
func (f fetched) malformedText() string {
	if len(f.malformed) == 0 {
		return "none"
	}
	parts := make([]string, len(f.malformed))
	for i, b := range f.malformed {
		parts[i] = fmt.Sprintf("kid %q: %v", b.kid, b.err)
	}
	return strings.Join(parts, "; ")
}
