package tools

// The settings of what HTTP and MCP tools learn about a call: the token
// claims forwarded to them and the key their requests are signed with
// (docs/tools.md, "What a tool learns about a call"). Each is a row of a
// table the gateway lifts into its own.

import (
	"fmt"
	"strings"

	"github.com/turnstile-gw/turnstile/internal/settings"
	"github.com/turnstile-gw/turnstile/internal/signature"
)

// CallInfo is what tools are told about a call beyond its arguments.
type CallInfo struct {
	// ToolClaims are the token claims forwarded to tools (Turnstile-Claim-
	// <name>, _meta turnstile/claims).
	ToolClaims []string
	// ToolsSigningSecret is the HMAC key of Turnstile-Signature on HTTP
	// tool requests; "": unsigned.
	ToolsSigningSecret settings.Secret
}

// CallInfoSettings are the rows of the claims forwarded and the signing
// secret.
func CallInfoSettings() []settings.Setting[CallInfo] {
	return []settings.Setting[CallInfo]{
		{Env: "TURNSTILE_TOOL_CLAIMS", DefDoc: "unset: no claims forwarded",
			Usage: "comma-separated token claims forwarded to HTTP tools as Turnstile-Claim-<name> and to MCP tools in _meta turnstile/claims, " +
				"e.g. tenant,plan (strings, numbers and booleans; a value with a line break or over 256 bytes is dropped with a log line)",
			Apply: func(c *CallInfo, v string) error {
				names, err := ParseClaimNames(v)
				c.ToolClaims = names
				return err
			}},
		{Env: "TURNSTILE_TOOLS_SIGNING_SECRET", DefDoc: "unset: tool requests are not signed", Secret: true,
			Usage: fmt.Sprintf("HMAC-SHA256 key of the Turnstile-Signature header on HTTP tool requests (t=<unix>,v1=<hex HMAC of \"t.body\">), "+
				"at least %d bytes (prefer the environment: flags show in ps)", signature.MinSecretBytes),
			Apply: func(c *CallInfo, v string) error {
				if err := signature.CheckSecret(v); err != nil {
					return err
				}
				c.ToolsSigningSecret = settings.Secret(v)
				return nil
			}},
	}
}

// ParseClaimNames reads a comma-separated list of claim names, each one a
// header name can carry, none twice; "" is none.
func ParseClaimNames(v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var names []string
	seen := map[string]bool{}
	for part := range strings.SplitSeq(v, ",") {
		name := strings.TrimSpace(part)
		if err := ClaimName(name); err != nil {
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
