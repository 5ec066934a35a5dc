package pseudonym

import (
	"strings"
	"testing"
)

func TestPseudonymIsStableAndHidesTheID(t *testing.T) {
	secret := []byte(strings.Repeat("s", 32))
	a, b := Derive(secret), Derive(secret)
	if a.Of("alice") != b.Of("alice") {
		t.Fatal("the same key gives alice two pseudonyms")
	}
	if a.Of("alice") == a.Of("bob") {
		t.Fatal("alice and bob share a pseudonym")
	}
	if p := a.Of("alice"); strings.Contains(p, "alice") || len(p) != 34 || !strings.HasPrefix(p, "u_") {
		t.Fatalf("pseudonym %q: want u_ and 32 hex digits, not the ID", p)
	}
	if New(secret).Of("alice") == a.Of("alice") {
		t.Fatal("a derived key must differ from the secret it comes from")
	}
	if r1, r2 := Random(), Random(); r1.Of("alice") == r2.Of("alice") {
		t.Fatal("two random keys gave the same pseudonym")
	}
}
