// Package pseudonym turns a user ID into a stable pseudonym that can be
// shown where the raw ID must not be (traces, exported records): an HMAC of
// the ID under a key only the gateway holds, so a pseudonym cannot be
// reversed by hashing guessed IDs, and every node with the same key gives
// the same user the same pseudonym.
package pseudonym

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
)

// MinKeyBytes is the shortest key accepted (as for HMAC secrets elsewhere).
const MinKeyBytes = 32

// Key makes pseudonyms. The zero Key is not usable; use New, Derive or
// Random.
type Key struct{ k []byte }

// New returns a Key using k as it is.
func New(k []byte) Key { return Key{k: append([]byte(nil), k...)} }

// Derive returns a Key derived from another secret (the auth secret), so
// that a deployment gets stable pseudonyms across nodes without a setting
// of its own, and the pseudonym key is not the secret itself.
func Derive(secret []byte) Key {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("turnstile pseudonym key v1"))
	return Key{k: m.Sum(nil)}
}

// Random returns a Key of random bytes: pseudonyms are stable only within
// this process.
func Random() Key {
	k := make([]byte, MinKeyBytes)
	_, _ = rand.Read(k) // crypto/rand.Read never fails
	return Key{k: k}
}

// Of returns the pseudonym of a user ID: "u_" and the first 16 bytes of
// HMAC-SHA256(key, user) in hex (32 digits), so that two users never
// share one.
func (k Key) Of(user string) string {
	m := hmac.New(sha256.New, k.k)
	m.Write([]byte(user))
	return "u_" + hex.EncodeToString(m.Sum(nil)[:16])
}
