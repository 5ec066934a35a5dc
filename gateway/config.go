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

// LogValue renders the configuration for slog with secrets shown only as set/unset and passwords
// in URLs masked, so the startup log can carry it whole.
func (c Config) LogValue() slog.Value {
	orEmbedded := func(s string) string {
		if s == "" {
			return "embedded"
		}
		return s
	}
	base := string(c.GeminiBaseURL)
	if base == "" {
		base = "google"
	}
	openaiBase := string(c.OpenAIBaseURL)
	if openaiBase == "" {
		openaiBase = "openai"
	}
	return slog.GroupValue(
		slog.String("addr", c.Addr),
		slog.String("redis", orEmbedded(settings.RedactURL(string(c.RedisURL)))),
		slog.String("redis_mode", string(c.RedisMode)),
		slog.Int("redis_wait_replicas", c.RedisWaitReplicas),
		slog.Any("gemini_api_key", c.GeminiAPIKey),
		slog.String("gemini_base_url", settings.RedactURL(base)),
		slog.Bool("vertex_ai", c.UseVertexAI),
		slog.String("vertex_project", c.VertexProject),
		slog.String("vertex_location", c.VertexLocation),
		slog.Bool("demo", c.Demo),
		slog.String("text_model", c.TextModel),
		slog.String("text_provider", string(c.TextProvider)),
		slog.Any("openai_api_key", c.OpenAIAPIKey),
		slog.String("openai_base_url", settings.RedactURL(openaiBase)),
		slog.String("openai_model", c.OpenAIModel),
		slog.String("tool_choice", c.ToolChoice),
		slog.String("live_model", c.LiveModel),
		slog.Any("auth_secret", c.AuthSecret),
		slog.Bool("dev_mode", c.DevMode()),
		slog.Bool("offline", c.Offline()),
		slog.Any("allowed_origins", c.AllowedOrigins),
		slog.String("kb_dir", orEmbedded(c.KBDir)),
		slog.String("tools_dir", c.ToolsDir),
		slog.String("mcp_config", c.MCPConfigFile),
		slog.Duration("mcp_start_timeout", c.MCPStartTimeout),
		slog.Any("tool_claims", c.ToolClaims),
		slog.Any("tools_signing_secret", c.ToolsSigningSecret),
		slog.Any("context_claims", c.ContextClaims),
		slog.String("live_voice", c.LiveVoice),
		slog.String("profiles_dir", c.ProfilesDir),
		slog.String("handoff_url", c.HandoffURL),
		slog.Any("handoff_signing_secret", c.HandoffSigningSecret),
		slog.Int("voice_max_retrieval", c.Voice.MaxRetrieval),
		slog.Int("voice_max_calls", c.Voice.MaxCalls),
		slog.Int("text_max_retrieval", c.Text.MaxRetrieval),
		slog.Int("text_max_calls", c.Text.MaxCalls),
		slog.Int("max_tool_iterations", c.MaxToolIterations),
		slog.String("log_level", c.LogLevel.String()),
		slog.Duration("shutdown_timeout", c.ShutdownTimeout),
		slog.Duration("session_ttl", c.SessionTTL),
		slog.Int("history_max", c.HistoryMax),
		slog.Int("max_message_bytes", c.MaxMessageBytes),
		slog.Int("max_text_chars", c.MaxTextChars),
		slog.Int("send_queue_bytes", c.SendQueueBytes),
		slog.Duration("write_timeout", c.WriteTimeout),
		slog.Duration("redis_timeout", c.RedisTimeout),
		slog.Duration("model_timeout", c.ModelTimeout),
		slog.Int("system_prompt_chars", len([]rune(c.SystemPrompt))),
		slog.String("admin_addr", c.AdminAddr),
		slog.String("public_url", c.PublicURL),
		slog.Any("twilio_auth_token", c.TwilioAuthToken),
		slog.Bool("admin_token_set", c.AdminToken != ""),
		slog.Bool("admin_metrics_open", c.AdminMetricsOpen),
		slog.Int("timeline_max", c.TimelineMax),
		slog.String("events_stream", c.EventsStream),
		slog.Int("events_maxlen", c.EventsMaxLen),
		slog.Duration("http_read_header_timeout", c.HTTPReadHeaderTimeout),
		slog.Duration("http_idle_timeout", c.Edge.HTTPIdleTimeout),
		slog.Int("http_max_header_bytes", c.HTTPMaxHeaderBytes),
		slog.Int("max_connections", c.MaxConnections),
		slog.Int("max_sessions", c.MaxSessions),
		slog.Int("max_sessions_per_user", c.MaxSessionsPerUser),
		slog.Duration("user_lease_ttl", c.UserLeaseTTL),
		slog.Uint64("file_limit", c.FileLimit),
		slog.Duration("auth_max_ttl", c.AuthMaxTTL),
		slog.Duration("auth_leeway", c.AuthLeeway),
		slog.String("auth_audience", c.AuthAudience),
		slog.String("auth_issuer", c.AuthIssuer),
		slog.String("auth_jwks_url", c.AuthJWKSURL),
		slog.Duration("auth_jwks_refresh", c.AuthJWKSRefresh),
		slog.Float64("message_rate", c.MessageRate),
		slog.Int("message_burst", c.MessageBurst),
		slog.Duration("rate_abuse_after", c.RateAbuseAfter),
		slog.Duration("abuse_cooldown", c.AbuseCooldown.First),
		slog.Duration("abuse_cooldown_max", c.AbuseCooldown.Max),
		slog.Float64("mic_pace", c.MicPace),
		slog.Int("turns_per_minute", c.TurnsPerMinute),
		slog.Int("voice_starts_per_minute", c.VoiceStartsPerMinute),
		slog.Int("new_sessions_per_minute", c.NewSessionsPerMinute),
		slog.Int("live_connects_per_minute", c.LiveConnectsPerMinute),
		slog.Int("user_live_connects_per_minute", c.UserLiveConnectsPerMinute),
		slog.Int("resumes_per_minute", c.ResumesPerMinute),
		slog.Int("user_resumes_per_minute", c.UserResumesPerMinute),
		slog.Int("context_max_tokens", c.ContextMaxTokens),
		slog.Int("history_max_bytes", c.HistoryMaxBytes),
		slog.Int("resume_history_max", c.ResumeHistoryMax),
		slog.Duration("ping_interval", c.PingInterval),
		slog.Duration("idle_timeout", c.Limits.IdleTimeout),
		slog.Any("block_steps", c.BlockSteps),
		slog.Duration("block_memory", c.BlockMemory),
		slog.String("tls_cert_file", c.TLSCertFile),
		slog.String("tls_key_file", c.TLSKeyFile),
		slog.Any("trusted_proxies", c.TrustedProxies),
		slog.Int("unauth_per_ip", c.UnauthPerIP),
		slog.Float64("unauth_share", c.UnauthShare),
		slog.Duration("unauth_idle_timeout", c.UnauthIdleTimeout),
		slog.Int("recent_sessions_bytes", c.RecentSessionsBytes),
		slog.Int("user_storage_bytes", c.UserStorageBytes),
	)
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
// packages' own rows are lifted into it (settings.Lift).
type configSetting = settings.Setting[Config]

func configSettings() []configSetting {
	return slices.Concat([]configSetting{
		listenerRow(server.AddrSetting()),
	}, redisSettings(store.ConnectionSettings()), []configSetting{}, modelSettings(transport.GeminiSettings()), []configSetting{demoSetting()},
		settings.Lift(telephony.CallSettings(), func(c *Config) *telephony.Calls { return &c.Calls }),
		modelSettings(transport.ModelSettings()),
		authSettings([]settings.Setting[server.Auth]{server.AuthSecretSetting()}),
		accessSettings([]settings.Setting[server.Access]{server.OriginsSetting()}), settings.Lift(tools.SourceSettings(), func(c *Config) *tools.Sources { return &c.Sources }),
		orchestratorSettings(orchestrator.BudgetSettings()), []configSetting{
			sessionRow(session.ToolIterationsSetting()),
			{Env: "TURNSTILE_LOG_LEVEL", Def: "info", Usage: "log level: debug, info, warn or error",
				Apply: func(c *Config, v string) error {
					switch strings.ToLower(v) {
					case "debug", "info", "warn", "error":
						return c.LogLevel.UnmarshalText([]byte(v))
					}
					return errors.New("must be debug, info, warn or error")
				}},
			settings.Duration("TURNSTILE_SHUTDOWN_TIMEOUT", "15s", "how long to drain sessions after SIGTERM", time.Nanosecond,
				func(c *Config) *time.Duration { return &c.ShutdownTimeout }),
			redisRow(store.SessionTTLSetting()),
		}, sessionSettings(session.SizeSettings()),
		[]configSetting{redisRow(store.TimeoutSetting()), sessionRow(session.ModelTimeoutSetting())},
		assistantSettings([]settings.Setting[session.Assistant]{session.SystemPromptSetting()}),
		orchestratorSettings(orchestrator.ConfirmSettings()), assistantSettings(session.RestrictionSettings()), []configSetting{
			{Env: "TURNSTILE_PPROF_ADDR", DefDoc: "unset: off",
				Usage: "loopback host:port of a second listener serving Go's CPU, heap and goroutine profiles (net/http/pprof); never on the public address",
				Apply: func(c *Config, v string) error {
					if v == "" {
						return nil
					}
					if err := server.CheckAddr(v); err != nil {
						return err
					}
					if !server.IsLoopbackAddr(v) {
						return errors.New("must be a loopback address: profiles expose the process's internals")
					}
					c.PprofAddr = v
					return nil
				}},
			listenerRow(server.AdminAddrSetting()),
		}, edgeSettings(server.EdgeSettings()), authSettings(server.AuthSettings()),
		sessionSettings(session.LimitSettings()), []configSetting{redisRow(store.UserStorageSetting())},
		sessionSettings(session.AbuseCooldownSettings()), sessionSettings(session.UpstreamBudgetSettings()),
		listenerSettings(server.TLSSettings()), edgeSettings(server.ProxySettings()), tracingSettings(),
		accessSettings(server.AdminSettings()), redisSettings(store.TimelineSettings()), sessionSettings(session.BlockSettings()),
		edgeSettings(server.UnauthSettings()), settings.Lift(tools.CallInfoSettings(), func(c *Config) *tools.CallInfo { return &c.CallInfo }), assistantSettings(session.ContextSettings(geminilive.Voices)), settings.Lift(handoff.HelpDeskSettings(), func(c *Config) *handoff.HelpDesk { return &c.HelpDesk }))
}

// tracingSettings lifts the tracing package's row into the gateway's table.
func tracingSettings() []configSetting {
	return settings.Lift([]settings.Setting[tracing.Settings]{tracing.PseudonymKeySetting()},
		func(c *Config) *tracing.Settings { return &c.Tracing })
}

// orchestratorSettings lifts a table of the orchestrator's budgets into the
// gateway's.
func orchestratorSettings(rows []settings.Setting[orchestrator.Budgets]) []configSetting {
	return settings.Lift(rows, func(c *Config) *orchestrator.Budgets { return &c.Budgets })
}

// redisSettings lifts a table of the store's settings into the gateway's;
// redisRow one row.
func redisSettings(rows []settings.Setting[store.Redis]) []configSetting {
	return settings.Lift(rows, func(c *Config) *store.Redis { return &c.Redis })
}

func redisRow(row settings.Setting[store.Redis]) configSetting {
	return redisSettings([]settings.Setting[store.Redis]{row})[0]
}

// edgeSettings lifts a table of the edge's limits into the gateway's.
func edgeSettings(rows []settings.Setting[server.Edge]) []configSetting {
	return settings.Lift(rows, func(c *Config) *server.Edge { return &c.Edge })
}

// modelSettings lifts a table of the models' settings into the gateway's.
func modelSettings(rows []settings.Setting[transport.Models]) []configSetting {
	return settings.Lift(rows, func(c *Config) *transport.Models { return &c.Models })
}

// listenerSettings lifts a table of the listeners' settings into the
// gateway's; listenerRow one row.
func listenerSettings(rows []settings.Setting[server.Listeners]) []configSetting {
	return settings.Lift(rows, func(c *Config) *server.Listeners { return &c.Listeners })
}

func listenerRow(row settings.Setting[server.Listeners]) configSetting {
	return listenerSettings([]settings.Setting[server.Listeners]{row})[0]
}

// accessSettings lifts a table of the listeners' access settings (origins,
// admin token) into the gateway's.
func accessSettings(rows []settings.Setting[server.Access]) []configSetting {
	return settings.Lift(rows, func(c *Config) *server.Access { return &c.Access })
}

// authSettings lifts a table of the edge's token settings into the gateway's.
func authSettings(rows []settings.Setting[server.Auth]) []configSetting {
	return settings.Lift(rows, func(c *Config) *server.Auth { return &c.Auth })
}

// sessionSettings lifts a table of the session's limits into the gateway's;
// sessionRow one row.
func sessionSettings(rows []settings.Setting[session.Limits]) []configSetting {
	return settings.Lift(rows, func(c *Config) *session.Limits { return &c.Limits })
}

func sessionRow(row settings.Setting[session.Limits]) configSetting {
	return sessionSettings([]settings.Setting[session.Limits]{row})[0]
}

// assistantSettings lifts a table of the session's assistant settings into
// the gateway's.
func assistantSettings(rows []settings.Setting[session.Assistant]) []configSetting {
	return settings.Lift(rows, func(c *Config) *session.Assistant { return &c.Assistant })
}

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
