package tools

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
)

// Deps is what a Go tool's handler is built with: its constructor receives
// one (see package builtin) and keeps what it needs. Nothing else reaches a
// handler; a tool never reads the environment or global state itself.
type Deps struct {
	// Settings are the tool's own settings: every environment variable
	// TURNSTILE_TOOL_<NAME>__<KEY> (NAME the tool's name in upper case, two
	// underscores before KEY so that no tool's settings are another's), by
	// its KEY in lower case: TURNSTILE_TOOL_WEATHER__UNITS=metric gives the
	// weather tool Settings["units"] == "metric". Never nil.
	Settings map[string]string
	// Secret returns the environment variable of that exact name (an API
	// key, say) and whether it is set and not empty. Keep secrets out of
	// results, error messages and logs.
	Secret func(name string) (string, bool)
	// HTTP is the client for outbound calls, shared by every tool. Make
	// requests with the call's ctx (http.NewRequestWithContext), so that
	// the tool's timeout and cancellations reach them.
	HTTP *http.Client
	// Log is the gateway's logger with the attribute tool=<name>. Never log
	// secrets or whole arguments.
	Log *slog.Logger
}

// SettingsPrefix starts the environment variables that become a tool's
// Settings: SettingsPrefix + NAME + "__" + KEY.
const SettingsPrefix = "TURNSTILE_TOOL_"

// NewDeps returns the Deps of the tool called name, reading settings and
// secrets from environ ("KEY=value" entries, as os.Environ returns them).
// A nil client or logger gives http.DefaultClient or a logger that
// discards.
func NewDeps(name string, environ []string, client *http.Client, log *slog.Logger) Deps {
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	prefix := SettingsPrefix + strings.ToUpper(name) + "__"
	settings := map[string]string{}
	for k, v := range env {
		if key, ok := strings.CutPrefix(k, prefix); ok && key != "" {
			settings[strings.ToLower(key)] = v
		}
	}
	if client == nil {
		client = http.DefaultClient
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return Deps{
		Settings: settings,
		Secret: func(k string) (string, bool) {
			v, ok := env[k]
			return v, ok && v != ""
		},
		HTTP: client,
		Log:  log.With("tool", name),
	}
}
