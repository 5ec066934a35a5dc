package gateway

// The parsers of single settings: each sets a Config field from a value, or
// returns an error that does not repeat the value.

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"unicode"

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

func parseAddr(c *Config, v string) error {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return errors.New("must be host:port, e.g. 127.0.0.1:8080 or :8080")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return errors.New("port must be a number from 0 to 65535")
	}
	if strings.ContainsFunc(host, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return errors.New("host has spaces or control characters")
	}
	c.Addr = v
	return nil
}

// isLoopbackAddr reports whether a valid host:port only listens on this machine. An empty host means
// every interface.
func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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

// parseOrigins accepts scheme://host[:port] entries; the host may start with "*." to match subdomains.
func parseOrigins(c *Config, v string) error {
	var out, bad []string
	for _, o := range strings.Split(v, ",") {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" ||
			strings.Contains(strings.TrimPrefix(u.Hostname(), "*."), "*") {
			bad = append(bad, strconv.Quote(o))
			continue
		}
		out = append(out, strings.ToLower(u.Scheme+"://"+u.Host))
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s: an origin is scheme://host[:port] with scheme http or https, "+
			"optionally *.host for subdomains", strings.Join(bad, ", "))
	}
	c.AllowedOrigins = out
	return nil
}

// httpToolOptions are how the HTTP tools of TURNSTILE_TOOLS_DIR are loaded,
// at start and at each reload.
func (c Config) httpToolOptions() httptool.Options {
	return httptool.Options{LookupEnv: c.toolsLookup, SigningSecret: []byte(c.ToolsSigningSecret)}
}
