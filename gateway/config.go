package gateway

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/turnstile-gw/turnstile/handoff"
	"github.com/turnstile-gw/turnstile/internal/settings"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/server"
	"github.com/turnstile-gw/turnstile/session"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/telephony"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tools/mcp"
	"github.com/turnstile-gw/turnstile/tracing"
	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/geminilive"
)

// Config is the gateway's whole configuration, resolved from flags, environment and defaults.
type Config struct {
	// Where the tools come from beside the built-in ones — the knowledge
	// base, the policy file (loaded), the HTTP tools' folder, the MCP
	// servers' file and how long each may take to start: the tools' own
	// settings (tools/settings_sources.go).
	tools.Sources
	HTTPTools   *tools.Registry             // the HTTP tools loaded from ToolsDir; nil = none
	toolsLookup func(string) (string, bool) // the environment ToolsDir's ${NAME} references read, at start and reload
	MCP         *mcp.Config                 // the loaded MCPConfigFile; nil = none (holds secrets: never log it)
	// What tools learn about a call: the claims forwarded and the signing
	// secret, the tools' own settings (tools/settings.go).
	tools.CallInfo
	// What a session's model is told — the system prompt, the token's
	// claims as facts — restricted output, the voices and the profiles:
	// the session's own settings (session/settings_assistant.go).
	session.Assistant
	// The hand-off to a person: the help desk's URL and signing secret,
	// the handoff package's own settings (handoff/settings.go).
	handoff.HelpDesk

	// Who answers: Gemini's key or endpoint or Vertex AI, the text
	// provider, the model names and the tool choice: the transport's own
	// settings (transport/settings.go). Offline, GeminiOffline and
	// OpenAIOffline are its.
	transport.Models
	Demo bool // TURNSTILE_DEMO: the offline demo model may serve a non-loopback address (config_production.go)

	// The per-turn budgets (a policy file may override them) and the
	// confirmations' life: the orchestrator's own settings
	// (orchestrator/settings.go).
	orchestrator.Budgets

	LogLevel        slog.Level
	ShutdownTimeout time.Duration // drain budget after SIGTERM

	PprofAddr string // loopback host:port serving net/http/pprof; "" = off
	VoiceLoop bool   // TURNSTILE_VOICE_LOOP (default true): voice sockets served by event loops (Linux)

	// Tracing is what the OpenTelemetry SDK's variables say, and the key of
	// the user pseudonyms: the tracing package's settings
	// (tracing/settings.go).
	Tracing tracing.Settings
	// Phone calls: the public URL carriers sign and Twilio's auth token,
	// the telephony package's own settings (telephony/settings.go).
	telephony.Calls

	// Which Redis holds the sessions and how it is read, each call's
	// deadline, a session's life there, the timelines and the event
	// stream, the per-user storage quota: the store's own settings
	// (store/settings.go).
	store.Redis

	// The edge: listeners, admission and tokens.
	// Where the public and the admin listener listen and TLS on both, and
	// who may use them — the browser Origins, the admin token: the edge's
	// own settings (server/settings_listen.go).
	server.Listeners
	server.Access
	FileLimit uint64 // the process's open-file limit (RLIMIT_NOFILE) at start; 0 = unknown
	// Browser tokens — the HS256 secret, the identity provider's key set,
	// the claims checked, a token's longest life: the edge's own settings
	// (server/settings_auth.go). Neither secret nor key set is dev mode
	// (DevMode).
	server.Auth
	// The listener's limits — HTTP timeouts, connection and session caps,
	// trusted proxies, unauthenticated connections: the edge's own
	// settings (server/settings.go).
	server.Edge

	// Warnings are settings the gateway adjusted instead of refusing them (a
	// default that conflicted with an explicit value, a value below its
	// minimum taken as the minimum); logged at start.
	Warnings []string
	// What one connection, session or user may do — rates, budgets,
	// history and message sizes, the send queue, write and model
	// deadlines, tool rounds — and the blocks the model imposes: the
	// session's own settings (session/settings.go).
	session.Limits
	// Clock is not a setting: nil is the system clock; tests inject one to
	// move token expiries.
	Clock session.Clock
}

// Secret and SecretURL are the settings package's (internal/settings),
// named here for embedders, who cannot import an internal package.
type (
	Secret    = settings.Secret
	SecretURL = settings.SecretURL
)

// DefaultSystemPrompt is the base instruction when TURNSTILE_SYSTEM_PROMPT
// is not set (the session's).
const DefaultSystemPrompt = session.DefaultSystemPrompt

// configSetting is one row of the gateway's table of settings; the
// packages' own rows are lifted into it (lift).
type configSetting = settings.Setting[Config]

// configSettings is the table, in the order -h lists it and errors are
// reported: the packages' rows, each lifted into the part of Config it
// fills, and the process's own (config_process.go).
func configSettings() []configSetting {
	return slices.Concat(
		lift(listenersPart, server.AddrSetting()),
		lift(redisPart, store.ConnectionSettings()...),
		lift(modelsPart, transport.GeminiSettings()...),
		[]configSetting{demoSetting()},
		lift(callsPart, telephony.CallSettings()...),
		lift(modelsPart, transport.ModelSettings()...),
		lift(authPart, server.AuthSecretSetting()),
		lift(accessPart, server.OriginsSetting()),
		lift(sourcesPart, tools.SourceSettings()...),
		lift(budgetsPart, orchestrator.BudgetSettings()...),
		lift(limitsPart, session.ToolIterationsSetting()),
		[]configSetting{logLevelSetting(), shutdownTimeoutSetting()},
		lift(redisPart, store.SessionTTLSetting()),
		lift(limitsPart, session.SizeSettings()...),
		lift(redisPart, store.TimeoutSetting()),
		lift(limitsPart, session.ModelTimeoutSetting()),
		lift(assistantPart, session.SystemPromptSetting()),
		lift(budgetsPart, orchestrator.ConfirmSettings()...),
		lift(assistantPart, session.RestrictionSettings()...),
		[]configSetting{pprofSetting(), voiceLoopSetting()},
		lift(listenersPart, server.AdminAddrSetting()),
		lift(edgePart, server.EdgeSettings()...),
		lift(authPart, server.AuthSettings()...),
		lift(limitsPart, session.LimitSettings()...),
		lift(redisPart, store.UserStorageSetting()),
		lift(limitsPart, session.AbuseCooldownSettings()...),
		lift(limitsPart, session.UpstreamBudgetSettings()...),
		lift(listenersPart, server.TLSSettings()...),
		lift(edgePart, server.ProxySettings()...),
		lift(tracingPart, tracing.PseudonymKeySetting()),
		lift(accessPart, server.AdminSettings()...),
		lift(redisPart, store.TimelineSettings()...),
		lift(limitsPart, session.BlockSettings()...),
		lift(edgePart, server.UnauthSettings()...),
		lift(callInfoPart, tools.CallInfoSettings()...),
		lift(assistantPart, session.ContextSettings(geminilive.Voices)...),
		lift(helpDeskPart, handoff.HelpDeskSettings()...),
	)
}

// lift puts a package's rows into the gateway's table: each fills its part
// of Config.
func lift[P any](part func(*Config) *P, rows ...settings.Setting[P]) []configSetting {
	return settings.Lift(rows, part)
}

// The parts of Config the packages' rows fill.
func listenersPart(c *Config) *server.Listeners   { return &c.Listeners }
func accessPart(c *Config) *server.Access         { return &c.Access }
func authPart(c *Config) *server.Auth             { return &c.Auth }
func edgePart(c *Config) *server.Edge             { return &c.Edge }
func redisPart(c *Config) *store.Redis            { return &c.Redis }
func modelsPart(c *Config) *transport.Models      { return &c.Models }
func callsPart(c *Config) *telephony.Calls        { return &c.Calls }
func sourcesPart(c *Config) *tools.Sources        { return &c.Sources }
func callInfoPart(c *Config) *tools.CallInfo      { return &c.CallInfo }
func budgetsPart(c *Config) *orchestrator.Budgets { return &c.Budgets }
func limitsPart(c *Config) *session.Limits        { return &c.Limits }
func assistantPart(c *Config) *session.Assistant  { return &c.Assistant }
func tracingPart(c *Config) *tracing.Settings     { return &c.Tracing }
func helpDeskPart(c *Config) *handoff.HelpDesk    { return &c.HelpDesk }

// LoadConfig resolves the configuration from command-line flags (args, without the program name),
// the environment (getenv; nil means an empty environment) and defaults, in that order of precedence.
// An empty value means "the default". It reports every invalid setting at once; -h prints the usage
// to stderr and returns flag.ErrHelp.
func LoadConfig(args []string, getenv func(string) string) (Config, error) {
	return loadConfig(args, getenv, os.Stderr)
}

func loadConfig(args []string, getenv func(string) string, usageOut io.Writer) (Config, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	all := configSettings()
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(usageOut)
	fs.Usage = func() { printConfigUsage(usageOut, all) }
	flagVals := make(map[string]*string, len(all))
	for _, s := range all {
		flagVals[s.Env] = fs.String(settings.FlagName(s.Env), "", s.Usage)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return Config{}, err
		}
		return Config{}, fmt.Errorf("parse flags: %w", err)
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("parse flags: unexpected argument %q", fs.Arg(0))
	}
	fromFlag := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { fromFlag[f.Name] = true })

	var c Config
	var errs []error
	failed := map[string]bool{}
	explicit := map[string]bool{} // set by a flag or the environment, not defaulted
	shown := map[string]string{}  // how each setting is named in cross-setting errors
	for _, s := range all {
		v, label := getenv(s.Env), s.Env
		if name := settings.FlagName(s.Env); fromFlag[name] {
			v, label = *flagVals[s.Env], fmt.Sprintf("-%s (%s)", name, s.Env)
		}
		explicit[s.Env] = v != ""
		if v == "" {
			v = s.Def
		}
		shown[s.Env] = s.Env
		if !s.Secret {
			shown[s.Env] = s.Env + "=" + configDisplayValue(s.Env, v)
			label += "=" + configDisplayValue(s.Env, v)
		}
		var warning settings.Warning
		if err := s.Apply(&c, v); errors.As(err, &warning) {
			c.Warnings = append(c.Warnings, string(warning))
		} else if err != nil {
			failed[s.Env] = true
			errs = append(errs, fmt.Errorf("%s: %w", label, err))
		}
	}
	c.FileLimit = openFileLimit()
	errs = append(errs, crossChecks(&c, failed, explicit, shown)...)
	errs = append(errs, productionChecks(c, failed, shown)...)
	errs = append(errs, loadToolSources(&c, getenv, failed, shown)...)
	errs = append(errs, loadTracing(&c, getenv)...)
	if len(errs) > 0 {
		// One problem per line; the caller adds its own heading.
		return Config{}, errors.Join(errs...)
	}
	return c, nil
}

// crossChecks enforces rules between settings, skipping those whose inputs already failed. When an
// explicit value conflicts with another setting's default, the default gives way, with a warning.
func crossChecks(c *Config, failed, explicit map[string]bool, shown map[string]string) []error {
	var errs []error
	for _, g := range []struct {
		retrieval, calls string
		r, n             *int
	}{
		{"TURNSTILE_VOICE_MAX_RETRIEVAL", "TURNSTILE_VOICE_MAX_CALLS", &c.Voice.MaxRetrieval, &c.Voice.MaxCalls},
		{"TURNSTILE_TEXT_MAX_RETRIEVAL", "TURNSTILE_TEXT_MAX_CALLS", &c.Text.MaxRetrieval, &c.Text.MaxCalls},
	} {
		if failed[g.retrieval] || failed[g.calls] || *g.r <= *g.n {
			continue
		}
		switch {
		case explicit[g.calls] && !explicit[g.retrieval]:
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s: the default %s lowered to %d to fit it (retrieval calls count toward the call budget)",
				shown[g.calls], g.retrieval, *g.n))
			*g.r = *g.n
		case explicit[g.retrieval] && !explicit[g.calls]:
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s: the default %s raised to %d to fit it (retrieval calls count toward the call budget)",
				shown[g.retrieval], g.calls, *g.r))
			*g.n = *g.r
		default:
			errs = append(errs, fmt.Errorf("%s: must not exceed %s (retrieval calls count toward the call budget)",
				shown[g.retrieval], shown[g.calls]))
		}
	}
	errs = append(errs, c.ToolChoiceChecks(failed, explicit, shown)...)
	errs = append(errs, redisCrossChecks(*c, failed, shown)...)
	if !failed["TURNSTILE_ADDR"] && !failed["TURNSTILE_AUTH_SECRET"] && !failed["TURNSTILE_AUTH_JWKS_URL"] &&
		c.DevMode() && !server.IsLoopbackAddr(c.Addr) {
		errs = append(errs, fmt.Errorf("%s: TURNSTILE_AUTH_SECRET is unset and so is TURNSTILE_AUTH_JWKS_URL (dev mode, anonymous users), "+
			"and the address is not loopback; set one of them or listen on 127.0.0.1, ::1 or localhost", shown["TURNSTILE_ADDR"]))
	}
	if !failed["TURNSTILE_PING_INTERVAL"] && !failed["TURNSTILE_IDLE_TIMEOUT"] && c.Limits.IdleTimeout <= c.PingInterval {
		errs = append(errs, fmt.Errorf("%s: must be longer than %s (a connection that answers pings must never look idle)",
			shown["TURNSTILE_IDLE_TIMEOUT"], shown["TURNSTILE_PING_INTERVAL"]))
	}
	errs = append(errs, edgeChecks(c, failed, explicit, shown)...)
	errs = append(errs, c.TLSChecks(failed, shown)...)
	errs = append(errs, adminChecks(c, failed, shown)...)
	if !failed["TURNSTILE_ABUSE_COOLDOWN"] && !failed["TURNSTILE_ABUSE_COOLDOWN_MAX"] && c.AbuseCooldown.First > c.AbuseCooldown.Max {
		errs = append(errs, fmt.Errorf("%s: must not exceed %s", shown["TURNSTILE_ABUSE_COOLDOWN"], shown["TURNSTILE_ABUSE_COOLDOWN_MAX"]))
	}
	return errs
}

// configDisplayValue is how a non-secret value appears in an error: URLs lose their passwords, and a long
// value (the system prompt) is cut.
func configDisplayValue(env, v string) string {
	if env == "REDIS_URL" || env == "GEMINI_BASE_URL" || env == "OPENAI_BASE_URL" {
		return settings.RedactURL(v)
	}
	if r := []rune(v); len(r) > 80 {
		return strconv.Quote(string(r[:80]) + "…")
	}
	if v == "" || strings.ContainsFunc(v, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return strconv.Quote(v)
	}
	return v
}

func printConfigUsage(w io.Writer, all []configSetting) {
	_, _ = fmt.Fprintf(w, "Usage: gateway [flags]\n\n"+
		"Every setting is a flag or an environment variable; a flag beats the environment, which beats the default.\n"+
		"Pass secrets through the environment: flags are visible to other users in ps.\n\n")
	for _, s := range all {
		def := s.Def
		if s.DefDoc != "" {
			def = s.DefDoc
		}
		_, _ = fmt.Fprintf(w, "  -%s, %s (default: %s)\n        %s\n", settings.FlagName(s.Env), s.Env, def, s.Usage)
	}
}
