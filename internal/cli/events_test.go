package cli

import (
	"strings"
	"testing"
)

// Every line `gateway events tail` writes about a problem carries its
// prefix, the second and later problems of a bad configuration too, so
// that a log collector or a reader can tell whose complaint each line is.
func TestEventsTailPrefixesEveryErrorLine(t *testing.T) {
	env := map[string]string{
		"REDIS_URL":               "ftp://localhost:6379",
		"TURNSTILE_REDIS_MODE":    "galaxy",
		"TURNSTILE_EVENTS_STREAM": "turnstile:events",
	}
	var out, errOut strings.Builder
	if code := Events([]string{"tail"}, func(k string) string { return env[k] }, &out, &errOut); code != 2 {
		t.Fatalf("exit %d, want 2 (a bad configuration); stderr %q", code, errOut.String())
	}
	lines := strings.Split(strings.TrimRight(errOut.String(), "\n"), "\n")
	if len(lines) < 2 {
		t.Fatalf("stderr %q: want one line per problem, two problems", errOut.String())
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "gateway events tail: ") {
			t.Errorf("an error line without the command's prefix: %q", l)
		}
	}
	if !strings.Contains(errOut.String(), "REDIS_URL") || !strings.Contains(errOut.String(), "TURNSTILE_REDIS_MODE") {
		t.Errorf("stderr %q does not name both settings", errOut.String())
	}
}
