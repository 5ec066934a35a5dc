package tools

// The settings of where the tools come from beside the built-in ones: the
// knowledge base's folder, the policy file, the folder of HTTP tools and
// the MCP servers' file (docs/tools.md). Each is a row of a table the
// gateway lifts into its own. The rows check the paths and load the
// policy; the gateway loads the HTTP tools and the MCP file (their
// packages build on this one), expanding their ${NAME} references.

import (
	"time"

	"github.com/turnstile-gw/turnstile/internal/settings"
)

// Sources are the tools' sources. Zero values are "none" (the knowledge
// base: the embedded sample).
type Sources struct {
	KBDir      string  // TURNSTILE_KB_DIR: knowledge-base folder; "" = embedded sample
	PolicyFile string  // TURNSTILE_POLICY; "" = none
	Policy     *Policy // the loaded PolicyFile; nil = none
	ToolsDir   string  // TURNSTILE_TOOLS_DIR: folder of HTTP tool folders; "" = none
	// MCPConfigFile is TURNSTILE_MCP_CONFIG; "" = none.
	MCPConfigFile string
	// MCPStartTimeout is how long startup waits for each MCP server.
	MCPStartTimeout time.Duration
}

// SourceSettings are the rows of the knowledge base, the policy file, the
// HTTP tools' folder and the MCP servers.
func SourceSettings() []settings.Setting[Sources] {
	return []settings.Setting[Sources]{
		{Env: "TURNSTILE_KB_DIR", DefDoc: "unset: embedded sample", Usage: "folder of Markdown knowledge-base documents",
			Apply: settings.OptionalFolder(func(s *Sources) *string { return &s.KBDir })},
		{Env: "TURNSTILE_POLICY", DefDoc: "unset: budgets from the settings below, tool metadata from the manifests",
			Usage: "policy file (.yaml, .yml or .json) overriding per-turn budgets and tool metadata; see docs/tools.md",
			Apply: parsePolicySetting},
		{Env: "TURNSTILE_TOOLS_DIR", DefDoc: "unset: no HTTP tools",
			Usage: "folder of manifest-only HTTP tools (one folder per tool: schema.json with an http block, guide.md); see docs/tools.md",
			Apply: settings.OptionalFolder(func(s *Sources) *string { return &s.ToolsDir })},
		{Env: "TURNSTILE_MCP_CONFIG", DefDoc: "unset: no MCP tool servers",
			Usage: `MCP servers file ({"mcpServers": {...}}, stdio command or Streamable HTTP url); see docs/tools.md`,
			// Only the path: the gateway loads the file, reading the
			// environment its ${NAME} references need.
			Apply: settings.OptionalFile("MCP config file", func(s *Sources) *string { return &s.MCPConfigFile })},
		MCPStartTimeoutSetting(),
	}
}

// DefaultMCPStartTimeout is how long each MCP server has to list its
// tools at start unless TURNSTILE_MCP_START_TIMEOUT says (mcp.Options'
// default too).
const DefaultMCPStartTimeout = 10 * time.Second

// MCPStartTimeoutSetting is the row of how long each MCP server has to
// list its tools at start (`gateway tools check` reads it too).
func MCPStartTimeoutSetting() settings.Setting[Sources] {
	return settings.Duration("TURNSTILE_MCP_START_TIMEOUT", DefaultMCPStartTimeout.String(), "how long startup waits for each MCP server to list its tools (a slower one joins later)", time.Nanosecond,
		func(s *Sources) *time.Duration { return &s.MCPStartTimeout })
}

// parsePolicySetting loads and validates the policy file. Its errors name
// the file, line and key; tool names are checked against the registry when
// the gateway assembles it.
func parsePolicySetting(s *Sources, v string) error {
	err := settings.OptionalFile("policy file", func(s *Sources) *string { return &s.PolicyFile })(s, v)
	if err != nil || s.PolicyFile == "" {
		return err
	}
	s.Policy, err = LoadPolicy(v)
	return err
}
