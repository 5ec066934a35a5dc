package gateway

import (
	"strings"
	"testing"
)

func TestToolClaimsAndSigningSecretAreCheckedAtStart(t *testing.T) {
	const secret = "tools-signing-secret-0123456789abcdef"
	c, err := loadTestConfig(t, []string{"-tool-claims", " tenant, plan_tier ,org-id"},
		map[string]string{"TURNSTILE_TOOLS_SIGNING_SECRET": secret})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.ToolClaims, ",") != "tenant,plan_tier,org-id" || string(c.ToolsSigningSecret) != secret {
		t.Fatalf("claims %q, secret set %v", c.ToolClaims, c.ToolsSigningSecret != "")
	}
	expectRefusedAtStart(t, "short-secret-value", []refusedSetting{
		{map[string]string{"TURNSTILE_TOOL_CLAIMS": "tenant,https://example.com/roles"}, "TURNSTILE_TOOL_CLAIMS"},
		{map[string]string{"TURNSTILE_TOOL_CLAIMS": "tenant,,plan"}, "TURNSTILE_TOOL_CLAIMS"},
		{map[string]string{"TURNSTILE_TOOL_CLAIMS": "tenant,Tenant"}, "listed twice"},
		{map[string]string{"TURNSTILE_TOOLS_SIGNING_SECRET": "short-secret-value"}, "TURNSTILE_TOOLS_SIGNING_SECRET"},
	})
}
