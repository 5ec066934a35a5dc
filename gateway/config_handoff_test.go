package gateway

import "testing"

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
	expectRefusedAtStart(t, "short-secret-value", []refusedSetting{
		{map[string]string{"TURNSTILE_HANDOFF_URL": "desk.example.com/hooks"}, "TURNSTILE_HANDOFF_URL"},
		{map[string]string{"TURNSTILE_HANDOFF_URL": "ftp://desk.example.com/"}, "TURNSTILE_HANDOFF_URL"},
		{map[string]string{"TURNSTILE_HANDOFF_SIGNING_SECRET": "short-secret-value"}, "TURNSTILE_HANDOFF_SIGNING_SECRET"},
	})
}
