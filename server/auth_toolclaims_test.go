package server

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/turnstile-gw/turnstile/internal/logtest"
)

// The claims TURNSTILE_TOOL_CLAIMS names reach the session's identity as
// tools get them; a value a header cannot carry is dropped with a log line
// that names the claim and never shows the value.
func TestVerifyKeepsTheToolClaimsAndDropsUnsafeValuesWithALogLine(t *testing.T) {
	var logs logtest.Buffer
	a := claimsAuth(t, AuthConfig{ToolClaims: []string{"tenant", "plan", "seats", "admin", "region", "missing"},
		Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	tok := signed(t, jwt.SigningMethodHS256, authTestSecret, jwt.MapClaims{
		"sub": "alice", "exp": fixedNow.Add(time.Hour).Unix(),
		"tenant": "acme", "plan": "pro\r\nX-Injected: yes", "seats": 12, "admin": true,
		"region": map[string]any{"eu": true}, "unlisted": "secret-ish",
	})
	id, err := a.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"tenant": "acme", "seats": "12", "admin": "true"}
	if len(id.Claims) != len(want) {
		t.Fatalf("claims %v, want %v", id.Claims, want)
	}
	for k, v := range want {
		if id.Claims[k] != v {
			t.Errorf("claim %s = %q, want %q", k, id.Claims[k], v)
		}
	}
	out := logs.String()
	for _, name := range []string{`"claim":"plan"`, `"claim":"region"`} {
		if !strings.Contains(out, "token claim not forwarded to tools") || !strings.Contains(out, name) {
			t.Errorf("no log line for %s in %s", name, out)
		}
	}
	if strings.Contains(out, "X-Injected") {
		t.Errorf("the log shows the refused value: %s", out)
	}
}
