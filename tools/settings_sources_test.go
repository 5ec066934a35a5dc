package tools_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/internal/settings"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
)

func TestSourceSettingsLoadThePolicyAndRefuseMissingPaths(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(samplePolicyYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TURNSTILE_POLICY": policy, "TURNSTILE_KB_DIR": dir}
	var s tools.Sources
	if err := settings.Read(&s, tools.SourceSettings(), func(k string) string { return env[k] }); err != nil {
		t.Fatalf("valid sources refused: %v", err)
	}
	if b, ok := s.Policy.Budget(protocol.ModeText); !ok || b.MaxCalls != 8 || s.PolicyFile != policy || s.KBDir != dir {
		t.Errorf("sources = %+v (text budget %+v, %v): want the policy file's budgets loaded and both paths kept", s, b, ok)
	}
	if s.MCPStartTimeout != 10*time.Second {
		t.Errorf("MCP start timeout = %v, want the 10s default", s.MCPStartTimeout)
	}

	env = map[string]string{"TURNSTILE_KB_DIR": filepath.Join(dir, "absent"), "TURNSTILE_TOOLS_DIR": policy,
		"TURNSTILE_MCP_CONFIG": dir}
	err := settings.Read(&tools.Sources{}, tools.SourceSettings(), func(k string) string { return env[k] })
	for _, name := range []string{"TURNSTILE_KB_DIR: ", "TURNSTILE_TOOLS_DIR: ", "TURNSTILE_MCP_CONFIG: "} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("error %v does not name %s (a missing folder, a file for a folder, a folder for a file)", err, name)
		}
	}
}
