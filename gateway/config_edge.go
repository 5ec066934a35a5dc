package gateway

// The checks of the edge's settings that depend on the machine (the
// open-file limit) or on each other: the connection cap and the session
// cap, the admin listener's address and token (the rows are the server's:
// server/settings.go, server/settings_listen.go).

import (
	"fmt"
	"net"

	"github.com/turnstile-gw/turnstile/server"
)

const (
	// reservedFiles are the descriptors kept for everything but browser
	// connections: Redis's pool, the model's HTTP connections, MCP servers,
	// the admin listener, files.
	reservedFiles = 256
	// defaultMaxSessions bounds a node's sessions when nothing smaller
	// does: at the 256 KiB send queue a full node holds at most 2.5 GiB.
	defaultMaxSessions = 10000
	// unknownFileLimitConnections is the connection cap where the open-file
	// limit cannot be read.
	unknownFileLimitConnections = 10000
)

// connectionRoom is the descriptors a process with this open-file limit
// has for connections: what remains after reservedFiles. A browser
// connection holds one (an idle or text session no more), a voice session's
// model connection one more, taken when it is dialled and refused when none
// is left (internal/fdroom); it is also the most public connections. 0: none.
func connectionRoom(fileLimit uint64) int {
	if fileLimit <= reservedFiles {
		return 0
	}
	return int(min(fileLimit-reservedFiles, 1<<30))
}

// edgeChecks resolves the connection and session caps and checks them
// against the open-file limit and each other.
func edgeChecks(c *Config, failed, explicit map[string]bool, shown map[string]string) []error {
	var errs []error
	room := unknownFileLimitConnections
	if c.FileLimit > 0 {
		room = connectionRoom(c.FileLimit)
	}
	switch {
	case failed["TURNSTILE_MAX_CONNECTIONS"]:
	case !explicit["TURNSTILE_MAX_CONNECTIONS"] && room < 1:
		errs = append(errs, fmt.Errorf("the open-file limit (RLIMIT_NOFILE) is %d: no room for connections beside the %d "+
			"descriptors Redis, the model and files need; raise it (ulimit -n)", c.FileLimit, reservedFiles))
	case !explicit["TURNSTILE_MAX_CONNECTIONS"]:
		c.MaxConnections = room
	case c.FileLimit > 0 && c.MaxConnections > room:
		errs = append(errs, fmt.Errorf("%s: leaves no room below the open-file limit (RLIMIT_NOFILE %d): at most %d "+
			"(what remains after %d descriptors for Redis, the model's HTTP connections and files); lower it or raise "+
			"the limit (ulimit -n)", shown["TURNSTILE_MAX_CONNECTIONS"], c.FileLimit, room, reservedFiles))
	}
	switch {
	case failed["TURNSTILE_MAX_SESSIONS"] || failed["TURNSTILE_MAX_CONNECTIONS"]:
	case !explicit["TURNSTILE_MAX_SESSIONS"]:
		// Room for page loads and health checks beside the sessions.
		c.MaxSessions = max(1, min(defaultMaxSessions, c.MaxConnections*9/10))
	case c.MaxConnections > 0 && c.MaxSessions > c.MaxConnections:
		errs = append(errs, fmt.Errorf("%s: would never be reached: every session is one of the TURNSTILE_MAX_CONNECTIONS=%d "+
			"connections", shown["TURNSTILE_MAX_SESSIONS"], c.MaxConnections))
	}
	if !failed["TURNSTILE_ADMIN_ADDR"] && !failed["TURNSTILE_ADDR"] {
		if _, port, _ := net.SplitHostPort(c.AdminAddr); port != "0" && c.AdminAddr == c.Addr {
			errs = append(errs, fmt.Errorf("%s: must differ from TURNSTILE_ADDR: the public listener serves no metrics",
				shown["TURNSTILE_ADMIN_ADDR"]))
		}
		if !server.IsLoopbackAddr(c.AdminAddr) && c.AdminMetricsOpen {
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s is not loopback and TURNSTILE_ADMIN_METRICS_OPEN is true: /metrics "+
				"answers whoever reaches it; keep it off the public network", shown["TURNSTILE_ADMIN_ADDR"]))
		}
	}
	return errs
}

// adminChecks refuses an admin listener off loopback without a token:
// it serves session timelines and operator actions.
func adminChecks(c *Config, failed map[string]bool, shown map[string]string) []error {
	if failed["TURNSTILE_ADMIN_ADDR"] || failed["TURNSTILE_ADMIN_TOKEN"] || server.IsLoopbackAddr(c.AdminAddr) || c.AdminToken != "" {
		return nil
	}
	return []error{fmt.Errorf("%s: is not loopback, so TURNSTILE_ADMIN_TOKEN (at least %d bytes) is required: the admin "+
		"listener serves conversations and operator actions; set it (e.g. openssl rand -hex 32) or listen on 127.0.0.1",
		shown["TURNSTILE_ADMIN_ADDR"], server.MinAdminTokenBytes)}
}
