package tools

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestClaimValueForwardsScalarsAndRefusesWhatAHeaderCannotCarry(t *testing.T) {
	cases := []struct {
		in   any
		want string
		ok   bool
	}{
		{"acme", "acme", true},
		{"Zürich", "Zürich", true},
		{float64(42), "42", true},
		{float64(1.5), "1.5", true},
		{json.Number("9007199254740993"), "9007199254740993", true},
		{true, "true", true},
		{"acme\r\nX-Evil: 1", "", false},
		{"a\nb", "", false},
		{"tab\there", "", false},
		{strings.Repeat("x", MaxClaimValue+1), "", false},
		{[]any{"a"}, "", false},
		{map[string]any{"a": 1}, "", false},
		{nil, "", false},
	}
	for _, c := range cases {
		got, err := ClaimValue(c.in)
		if c.ok != (err == nil) || got != c.want {
			t.Errorf("ClaimValue(%#v) = %q, %v; want %q ok=%v", c.in, got, err, c.want, c.ok)
		}
		if err != nil && !errors.Is(err, ErrClaimValue) {
			t.Errorf("ClaimValue(%#v) error %v is not ErrClaimValue", c.in, err)
		}
	}
}

func TestClaimNameIsWhatAHeaderNameCanCarry(t *testing.T) {
	for name, ok := range map[string]bool{"tenant": true, "org_id": true, "plan-tier": true, "Tenant2": true,
		"": false, "-x": false, "a b": false, "https://example.com/roles": false, "x\r\n": false,
		strings.Repeat("a", 65): false} {
		if err := ClaimName(name); (err == nil) != ok {
			t.Errorf("ClaimName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

func TestIdentityMetaCarriesTheSameFactsAsTheHeaders(t *testing.T) {
	id := Identity{User: "alice", Session: "s1", Call: "c1", IdempotencyKey: "k1", Claims: Claims{"tenant": "acme"}}
	m := id.Meta()
	want := map[string]string{MetaUser: "alice", MetaSession: "s1", MetaCall: "c1", MetaIdempotencyKey: "k1"}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("_meta %s = %v, want %q", k, m[k], v)
		}
	}
	if c, _ := m[MetaClaims].(map[string]any); c["tenant"] != "acme" {
		t.Errorf("_meta claims = %v", m[MetaClaims])
	}
	if got := (Identity{User: "alice"}).Meta(); len(got) != 1 {
		t.Errorf("empty facts are sent: %v", got)
	}
}
