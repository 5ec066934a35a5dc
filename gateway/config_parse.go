package gateway

// The checks that need more than a row: the HTTP tools and the MCP file the
// tools' rows name, loaded with the environment, and the Redis settings
// that need a REDIS_URL.

import (
	"fmt"
	"os"

	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/tools/httptool"
	"github.com/turnstile-gw/turnstile/tools/mcp"
)

// lookupFrom turns getenv into a lookup in which an empty variable is an
// unset one, as everywhere in the configuration.
func lookupFrom(getenv func(string) string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v := getenv(k)
		return v, v != ""
	}
}

// loadToolSources loads the HTTP tools of TURNSTILE_TOOLS_DIR and the MCP
// config file, expanding their ${NAME} references from the environment.
// Each problem is one error naming the setting.
func loadToolSources(c *Config, getenv func(string) string, failed map[string]bool, shown map[string]string) []error {
	var errs []error
	if c.ToolsDir != "" && !failed["TURNSTILE_TOOLS_DIR"] {
		c.toolsLookup = lookupFrom(getenv) // a reload of the folder reads the same environment
		reg, err := httptool.Load(os.DirFS(c.ToolsDir), "TURNSTILE_TOOLS_DIR "+c.ToolsDir, c.httpToolOptions())
		if err != nil {
			for _, e := range flattenErrors(err) {
				errs = append(errs, fmt.Errorf("%s: %w", shown["TURNSTILE_TOOLS_DIR"], e))
			}
		}
		c.HTTPTools = reg
	}
	if c.MCPConfigFile != "" && !failed["TURNSTILE_MCP_CONFIG"] {
		cfg, err := mcp.LoadConfig(c.MCPConfigFile, lookupFrom(getenv))
		if err != nil {
			for _, e := range flattenErrors(err) {
				errs = append(errs, fmt.Errorf("TURNSTILE_MCP_CONFIG: %w", e))
			}
		}
		c.MCP = cfg
	}
	return errs
}

// redisCrossChecks refuses Redis settings that need a REDIS_URL without
// one: the embedded miniredis is one server with no replicas.
func redisCrossChecks(c Config, failed map[string]bool, shown map[string]string) []error {
	if c.RedisURL != "" || failed["REDIS_URL"] {
		return nil
	}
	var errs []error
	if !failed["TURNSTILE_REDIS_MODE"] && c.RedisMode != store.RedisSingle {
		errs = append(errs, fmt.Errorf("%s: needs REDIS_URL (the embedded miniredis is a single server)",
			shown["TURNSTILE_REDIS_MODE"]))
	} else if !failed["TURNSTILE_REDIS_WAIT_REPLICAS"] && c.RedisWaitReplicas > 0 {
		errs = append(errs, fmt.Errorf("%s: needs REDIS_URL (the embedded miniredis has no replicas)",
			shown["TURNSTILE_REDIS_WAIT_REPLICAS"]))
	}
	return errs
}

// httpToolOptions are how the HTTP tools of TURNSTILE_TOOLS_DIR are loaded,
// at start and at each reload.
func (c Config) httpToolOptions() httptool.Options {
	return httptool.Options{LookupEnv: c.toolsLookup, SigningSecret: []byte(c.ToolsSigningSecret)}
}
