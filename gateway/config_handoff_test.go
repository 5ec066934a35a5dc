package gateway

import (
	"strings"
	"testing"
)

func TestHandoffURLAndSecretAreCheckedAtStart(t *testing.T) {
	const secret = "handoff-signing-secret-0123456789abcdef"
	c, err := loadTestConfig(t, []string{"-handoff-url", "https://desk.example.com/hooks/turnstile"},
		map[string]string{"TURNSTILE_HANDOFF_SIGNING_SECRET": secret})
	if err != nil {
		t.Fatal(err)
	}
	if c.HandoffURL != "https://desk.example.com/hooks/turnstile" || string(c.HandoffSigningSecret) != secret {
		t.Fatalf("url %q, secret set %v", c.HandoffURL, c.HandoffSigningSecret != "")
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"TURNSTILE_HANDOFF_URL": "desk.example.com/hooks"}, "TURNSTILE_HANDOFF_URL"},
		{map[string]string{"TURNSTILE_HANDOFF_URL": "ftp://desk.example.com/"}, "TURNSTILE_HANDOFF_URL"},
		{map[string]string{"TURNSTILE_HANDOFF_SIGNING_SECRET": "short-secret-value"}, "TURNSTILE_HANDOFF_SIGNING_SECRET"},
	} {
		_, err := loadTestConfig(t, nil, tc.env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want one naming %s", tc.env, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "short-secret-value") {
			t.Errorf("the error shows the secret: %v", err)
		}
	}
}
