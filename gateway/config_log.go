package gateway

// How the configuration appears in the startup log.

import (
	"log/slog"

	"github.com/turnstile-gw/turnstile/internal/settings"
)

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
