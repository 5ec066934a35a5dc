package telephony

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func paramMap(ps []Param) map[string]string {
	m := map[string]string{}
	for _, p := range ps {
		m[p.Name] = p.Value
	}
	return m
}

func TestSignedParamsComeBackAsTheCall(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := NewSigner([]byte("key"), func() time.Time { return now })
	call := Call{ID: "CA1", From: "+15550100", To: "+15550199"}
	got, err := s.Check(paramMap(s.Params(call)), "CA1")
	if err != nil || got != call {
		t.Fatalf("Check = %+v, %v", got, err)
	}
}

// Two answers for one call in the same second are two starts: a replay of
// one is refused by its signature, which the other does not share.
func TestTwoAnswersInOneSecondAreSignedApart(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := NewSigner([]byte("key"), func() time.Time { return now })
	call := Call{ID: "CA1", From: "+15550100", To: "+15550199"}
	a, b := paramMap(s.Params(call)), paramMap(s.Params(call))
	if a[ParamSignature] == b[ParamSignature] {
		t.Fatalf("two answers share the signature %q", a[ParamSignature])
	}
	for _, p := range []map[string]string{a, b} {
		if _, err := s.Check(p, "CA1"); err != nil {
			t.Fatalf("Check: %v", err)
		}
	}
}

func TestTamperedStaleOrForeignParamsAreRefused(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	s := NewSigner([]byte("key"), clock)
	good := paramMap(s.Params(Call{ID: "CA1", From: "+15550100", To: "+15550199"}))
	edit := func(k, v string) map[string]string {
		m := map[string]string{}
		for kk, vv := range good {
			m[kk] = vv
		}
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	cases := map[string]struct {
		params  map[string]string
		callSID string
		signer  *Signer
	}{
		"unsigned":       {edit(ParamSignature, ""), "CA1", s},
		"from changed":   {edit(ParamFrom, "+15550666"), "CA1", s},
		"issued changed": {edit(ParamIssued, "1700000001"), "CA1", s},
		"nonce changed":  {edit(ParamNonce, "AAAAAAAAAAAAAAAA"), "CA1", s},
		"nonce removed":  {edit(ParamNonce, ""), "CA1", s},
		"another call":   {good, "CA2", s},
		"another key":    {good, "CA1", NewSigner([]byte("other"), clock)},
		"stale": {good, "CA1", NewSigner([]byte("key"), func() time.Time {
			return now.Add(ParamsMaxAge + time.Second)
		})},
		"none": {map[string]string{}, "CA1", s},
		// The same MAC spelt another way (the last character's two spare
		// bits set): the replay check keys on the signature as sent.
		"signature respelt": {edit(ParamSignature, respelt(good[ParamSignature])), "CA1", s},
	}
	for name, tc := range cases {
		if _, err := tc.signer.Check(tc.params, tc.callSID); !errors.Is(err, ErrParams) {
			t.Errorf("%s: err = %v, want ErrParams", name, err)
		}
	}
}

func TestPseudonymIsStableAndHidesTheNumber(t *testing.T) {
	s := NewSigner([]byte("key"), nil)
	a, b := s.Pseudonym("+15550100"), s.Pseudonym("+15550100")
	if a != b || a == s.Pseudonym("+15550101") {
		t.Fatalf("pseudonyms %q %q", a, b)
	}
	if strings.Contains(a, "5550100") || a == NewSigner([]byte("other"), nil).Pseudonym("+15550100") {
		t.Fatalf("pseudonym %q reveals the number or ignores the key", a)
	}
}

// respelt is sig, base64url of 32 bytes (43 characters, the last carrying
// 4 bits and 2 spare ones), with a spare bit of its last character flipped:
// a lenient decoder reads the same bytes.
func respelt(sig string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, sig[len(sig)-1])
	return sig[:len(sig)-1] + string(alphabet[last^1])
}
