// Package signature signs and verifies the gateway's outgoing requests
// (tool calls, and later hand-offs) with the scheme webhook senders use:
//
//	Turnstile-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
//
// The receiver recomputes the HMAC over the timestamp and the raw body it
// got, compares in constant time, and refuses a timestamp outside its
// replay window (DefaultTolerance).
package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Header is the request header that carries the signature.
const Header = "Turnstile-Signature"

// DefaultTolerance is the replay window Verify is meant to be used with:
// a signature whose timestamp is further than this from the receiver's
// clock is refused.
const DefaultTolerance = 5 * time.Minute

// Errors of Verify.
var (
	ErrMalformed = errors.New("signature: malformed header (want t=<unix>,v1=<hex>)")
	ErrMismatch  = errors.New("signature: no v1 value matches the body")
	ErrExpired   = errors.New("signature: timestamp outside the replay window")
)

// Sign returns the header value for body sent at t. It costs one HMAC over
// the body.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks header against body: one of its v1 values (a sender
// rotating secrets may send several) must be the HMAC of "t.body", and t
// must be within tolerance of now. It is what a receiver written in Go
// does; docs/tools.md shows the same in Node.
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return ErrMalformed
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			b, err := hex.DecodeString(v)
			if err != nil {
				return ErrMalformed
			}
			sigs = append(sigs, b)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrMalformed
	}
	want := mac(secret, ts, body)
	matched := false
	for _, s := range sigs {
		matched = matched || hmac.Equal(s, want)
	}
	if !matched {
		return ErrMismatch
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return ErrExpired
	}
	return nil
}
