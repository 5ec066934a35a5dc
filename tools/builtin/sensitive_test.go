package builtin_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/turnstile-gw/turnstile/tools"
)

// Which built-in tools untrusted text must not set off (sensitive), and
// whose output is the gateway's own (trustedOutput): the defaults
// docs/tools.md lists.
func TestBuiltinSensitiveAndTrustedDefaults(t *testing.T) {
	reg := registry(t)
	cases := []struct {
		tool               string
		sensitive, trusted bool
		blocksUser         bool
	}{
		{"ignore_user", true, true, true},        // blocks the user
		{"end_voice_session", true, true, false}, // ends something (endsSession)
		{"request_human", true, true, false},     // ends the model's part (endsSession)
		{"start_voice_session", false, true, false},
		{"finish", false, true, false},
		{"kb_search", false, false, false}, // articles anyone may have written
		{"kb_get", false, false, false},
	}
	for _, c := range cases {
		tool, ok := reg.Lookup(c.tool)
		if !ok {
			t.Fatalf("no built-in %s", c.tool)
		}
		if tool.IsSensitive() != c.sensitive || tool.TrustedOutput != c.trusted || tool.BlocksUser != c.blocksUser {
			t.Errorf("%s: sensitive %v, trustedOutput %v, blocksUser %v; want %v, %v, %v", c.tool, tool.IsSensitive(),
				tool.TrustedOutput, tool.BlocksUser, c.sensitive, c.trusted, c.blocksUser)
		}
	}
}

func TestPolicyOverridesSensitive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	policy := "tools:\n  end_voice_session:\n    sensitive: false\n  kb_get:\n    sensitive: true\n  start_voice_session:\n    requiresConfirmation: true\n"
	if err := os.WriteFile(path, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := tools.LoadPolicy(path)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry(t).WithPolicy(p)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"end_voice_session": false, "kb_get": true, "start_voice_session": true,
		"ignore_user": true} {
		if tool, _ := reg.Lookup(name); tool.IsSensitive() != want {
			t.Errorf("%s under the policy: sensitive %v, want %v", name, tool.IsSensitive(), want)
		}
	}
}
