package gateway

// Settings of what HTTP and MCP tools learn about a call: the token claims
// forwarded to them and the secret their requests are signed with
// (docs/tools.md, "What a tool learns about a call").

import (
	"fmt"
	"strings"

	"github.com/turnstile-gw/turnstile/tools"
)

// minToolsSigningSecret is the shortest signing secret taken: an HMAC key
// a tool's service could guess would let anyone sign.
const minToolsSigningSecret = 32

func toolIdentitySettings() []configSetting {
	return []configSetting{
		{Env: "TURNSTILE_TOOL_CLAIMS", DefDoc: "unset: no claims forwarded",
			Usage: "comma-separated token claims forwarded to HTTP tools as Turnstile-Claim-<name> and to MCP tools in _meta turnstile/claims, " +
				"e.g. tenant,plan (strings, numbers and booleans; a value with a line break or over 256 bytes is dropped with a log line)",
			Apply: func(c *Config, v string) error {
				names, err := parseToolClaims(v)
				c.ToolClaims = names
				return err
			}},
		{Env: "TURNSTILE_TOOLS_SIGNING_SECRET", DefDoc: "unset: tool requests are not signed", Secret: true,
			Usage: fmt.Sprintf("HMAC-SHA256 key of the Turnstile-Signature header on HTTP tool requests (t=<unix>,v1=<hex HMAC of \"t.body\">), "+
				"at least %d bytes (prefer the environment: flags show in ps)", minToolsSigningSecret),
			Apply: func(c *Config, v string) error {
				if err := checkSigningSecret(v); err != nil {
					return err
				}
				c.ToolsSigningSecret = Secret(v)
				return nil
			}},
	}
}

// parseToolClaims reads TURNSTILE_TOOL_CLAIMS: claim names, each one a
// header name can carry, none twice.
func parseToolClaims(v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var names []string
	seen := map[string]bool{}
	for part := range strings.SplitSeq(v, ",") {
		name := strings.TrimSpace(part)
		if err := tools.ClaimName(name); err != nil {
			return nil, err
		}
		// Header names are case-insensitive: tenant and Tenant would be
		// the same header.
		if seen[strings.ToLower(name)] {
			return nil, fmt.Errorf("claim %q is listed twice (names are case-insensitive in headers)", name)
		}
		seen[strings.ToLower(name)] = true
		names = append(names, name)
	}
	return names, nil
}
