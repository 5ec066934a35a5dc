package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"time"
)

func TestSignatureIsTheHMACOfTimestampDotBody(t *testing.T) {
	secret := []byte("whsec-test")
	at := time.Unix(1_800_000_000, 0)
	body := []byte(`{"title":"Noisy grinder"}`)
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("1800000000." + string(body)))
	want := "t=1800000000,v1=" + hex.EncodeToString(h.Sum(nil))
	if got := Sign(secret, at, body); got != want {
		t.Fatalf("Sign = %q, want %q", got, want)
	}
}

func TestVerifyRefusesTamperedStaleAndMalformedSignatures(t *testing.T) {
	secret := []byte("whsec-test")
	at := time.Unix(1_800_000_000, 0)
	body := []byte(`{"a":1}`)
	good := Sign(secret, at, body)
	cases := []struct {
		name   string
		header string
		body   []byte
		now    time.Time
		want   error
	}{
		{"as sent", good, body, at, nil},
		{"within the window", good, body, at.Add(DefaultTolerance), nil},
		{"clock behind within the window", good, body, at.Add(-DefaultTolerance), nil},
		{"another body", good, []byte(`{"a":2}`), at, ErrMismatch},
		{"another secret", Sign([]byte("other"), at, body), body, at, ErrMismatch},
		{"timestamp changed", "t=1800000001," + good[len("t=1800000000,"):], body, at, ErrMismatch},
		{"replayed after the window", good, body, at.Add(DefaultTolerance + time.Second), ErrExpired},
		{"rotated: second v1 matches", "t=1800000000,v1=00ff," + good[len("t=1800000000,"):], body, at, nil},
		{"no v1", "t=1800000000", body, at, ErrMalformed},
		{"no t", good[len("t=1800000000,"):], body, at, ErrMalformed},
		{"not hex", "t=1800000000,v1=zz", body, at, ErrMalformed},
		{"empty", "", body, at, ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Verify(secret, c.header, c.body, c.now, DefaultTolerance)
			if !errors.Is(err, c.want) {
				t.Fatalf("Verify = %v, want %v", err, c.want)
			}
		})
	}
}
