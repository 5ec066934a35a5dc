package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/internal/settings"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/server"
	"github.com/turnstile-gw/turnstile/session"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tracing"
	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/geminilive"
)

// refusedSetting is a setting's bad value (env) and what the error must
// name (want).
type refusedSetting struct {
	env  map[string]string
	want string
}

// expectRefusedAtStart checks that each case stops the start with an error
// naming what it wants, and that no error shows secret.
func expectRefusedAtStart(t *testing.T, secret string, cases []refusedSetting) {
	t.Helper()
	for _, tc := range cases {
		_, err := loadTestConfig(t, nil, tc.env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want one naming %s", tc.env, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the error shows the secret: %v", err)
		}
	}
}

// env builds a getenv from pairs.
func configEnv(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

const testAuthSecret = "0123456789abcdef0123456789abcdef-secret"

func loadTestConfig(t *testing.T, args []string, kv map[string]string) (Config, error) {
	t.Helper()
	var out bytes.Buffer
	return loadConfig(args, configEnv(kv), &out)
}

func TestLoadConfigDefaults(t *testing.T) {
	c, err := loadTestConfig(t, nil, nil)
	if err != nil {
		t.Fatalf("defaults must be valid: %v", err)
	}
	want := Config{
		Listeners: server.Listeners{Addr: "127.0.0.1:8080"},
		Models: transport.Models{TextModel: "gemini-2.5-flash", LiveModel: "gemini-2.5-flash-native-audio-preview-12-2025",
			TextProvider: "gemini", OpenAIModel: "gpt-4o-mini", ToolChoice: "auto"},
		Budgets: orchestrator.Budgets{Voice: orchestrator.Budget{MaxRetrieval: 2, MaxCalls: 3},
			Text: orchestrator.Budget{MaxRetrieval: 5, MaxCalls: 10}, ConfirmTTL: 2 * time.Minute},
		LogLevel: slog.LevelInfo, ShutdownTimeout: 15 * time.Second, VoiceLoop: true,
		Redis:     store.Redis{RedisMode: "single", RedisTimeout: 500 * time.Millisecond, SessionTTL: 24 * time.Hour},
		Assistant: session.Assistant{SystemPrompt: DefaultSystemPrompt},
		Sources:   tools.Sources{MCPStartTimeout: 10 * time.Second},
	}
	want.MaxToolIterations, want.HistoryMax = 20, 200
	want.MaxMessageBytes, want.MaxTextChars, want.SendQueueBytes, want.WriteTimeout = 65536, 8000, 256<<10, 5*time.Second
	want.ModelTimeout = 60 * time.Second
	withEdgeDefaults(&want)
	withDefaultSessionLimits(&want)
	withTracingDefaults(&want)
	withBlockDefaults(&want)
	want.LiveVoices = geminilive.Voices // every prebuilt voice may be picked
	if fmt.Sprintf("%+v", c) != fmt.Sprintf("%+v", want) {
		t.Errorf("defaults\n got %+v\nwant %+v", c, want)
	}
	if !c.DevMode() || !c.Offline() {
		t.Errorf("defaults: DevMode=%v Offline=%v, want both true", c.DevMode(), c.Offline())
	}
	if !strings.Contains(c.SystemPrompt, "kb_search") {
		t.Errorf("default system prompt does not mention the knowledge-base tool: %q", c.SystemPrompt)
	}
}

// withDefaultSessionLimits sets the session limits' defaults.
func withDefaultSessionLimits(c *Config) {
	c.MessageRate, c.MessageBurst, c.RateAbuseAfter, c.MicPace = 10, 40, 10*time.Second, 1.25
	c.TurnsPerMinute, c.VoiceStartsPerMinute, c.ContextMaxTokens = 20, 6, 32000
	c.NewSessionsPerMinute = 30
	c.LiveConnectsPerMinute, c.UserLiveConnectsPerMinute = 10, 30
	c.ResumesPerMinute, c.UserResumesPerMinute = 10, 30
	c.HistoryMaxBytes, c.ResumeHistoryMax = 512<<10, 50
	c.AuthLeeway, c.PingInterval, c.IdleTimeout = 30*time.Second, 30*time.Second, 90*time.Second
	c.RecentSessionsBytes = 64 << 20
	c.UserStorageBytes = 20 << 20
	c.AbuseCooldown = store.CooldownPolicy{First: time.Minute, Max: time.Hour, Memory: 24 * time.Hour}
	c.TimelineMax, c.EventsMaxLen = 200, 100000
}

func TestLoadConfigFromEnvironment(t *testing.T) {
	kb := t.TempDir()
	c, err := loadTestConfig(t, nil, map[string]string{
		"TURNSTILE_ADDR":                "0.0.0.0:9000",
		"REDIS_URL":                     "redis://:pw@127.0.0.1:6379/2",
		"GEMINI_API_KEY":                "key-123",
		"GEMINI_BASE_URL":               "http://127.0.0.1:7000",
		"TURNSTILE_TEXT_MODEL":          "text-m",
		"TURNSTILE_LIVE_MODEL":          "live-m",
		"TURNSTILE_AUTH_SECRET":         testAuthSecret,
		"TURNSTILE_ALLOWED_ORIGINS":     " https://App.example.com , https://*.example.com:8443,, ",
		"TURNSTILE_KB_DIR":              kb,
		"TURNSTILE_VOICE_MAX_RETRIEVAL": "1",
		"TURNSTILE_VOICE_MAX_CALLS":     "1",
		"TURNSTILE_TEXT_MAX_RETRIEVAL":  "0",
		"TURNSTILE_TEXT_MAX_CALLS":      "4",
		"TURNSTILE_MAX_TOOL_ITERATIONS": "1",
		"TURNSTILE_LOG_LEVEL":           "DEBUG",
		"TURNSTILE_SHUTDOWN_TIMEOUT":    "2s",
		"TURNSTILE_SESSION_TTL":         "1h",
		"TURNSTILE_HISTORY_MAX":         "2",
		"TURNSTILE_MAX_MESSAGE_BYTES":   "1024",
		"TURNSTILE_MAX_TEXT_CHARS":      "1",
		"TURNSTILE_SEND_QUEUE_BYTES":    "65536",
		"TURNSTILE_WRITE_TIMEOUT":       "1s",
		"TURNSTILE_REDIS_TIMEOUT":       "50ms",
		"TURNSTILE_MODEL_TIMEOUT":       "3m",
		"TURNSTILE_SYSTEM_PROMPT":       "Be terse.",
		"TURNSTILE_TEXT_PROVIDER":       " OpenAI ",
		"OPENAI_API_KEY":                "sk-proj-123",
		"OPENAI_BASE_URL":               "http://localhost:11434/v1",
		"TURNSTILE_OPENAI_MODEL":        "llama3.1",
		"TURNSTILE_OPENAI_TOOL_CHOICE":  "Required",
	})
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	want := Config{
		Listeners: server.Listeners{Addr: "0.0.0.0:9000"},
		Models: transport.Models{GeminiAPIKey: "key-123", GeminiBaseURL: "http://127.0.0.1:7000", TextModel: "text-m", LiveModel: "live-m",
			TextProvider: "openai", OpenAIAPIKey: "sk-proj-123", OpenAIBaseURL: "http://localhost:11434/v1", OpenAIModel: "llama3.1",
			ToolChoice: "required"},
		Redis:  store.Redis{RedisURL: "redis://:pw@127.0.0.1:6379/2", RedisMode: "single", RedisTimeout: 50 * time.Millisecond, SessionTTL: time.Hour},
		Auth:   server.Auth{AuthSecret: testAuthSecret},
		Access: server.Access{AllowedOrigins: []string{"https://app.example.com", "https://*.example.com:8443"}},
		Budgets: orchestrator.Budgets{Voice: orchestrator.Budget{MaxRetrieval: 1, MaxCalls: 1},
			Text: orchestrator.Budget{MaxRetrieval: 0, MaxCalls: 4}, ConfirmTTL: 2 * time.Minute},
		LogLevel: slog.LevelDebug, ShutdownTimeout: 2 * time.Second, VoiceLoop: true,
		Assistant: session.Assistant{SystemPrompt: "Be terse."},
		Sources:   tools.Sources{KBDir: kb, MCPStartTimeout: 10 * time.Second},
	}
	want.MaxToolIterations, want.HistoryMax = 1, 2
	want.MaxMessageBytes, want.MaxTextChars, want.SendQueueBytes, want.WriteTimeout = 1024, 1, 65536, time.Second
	want.ModelTimeout = 3 * time.Minute
	withEdgeDefaults(&want)
	withDefaultSessionLimits(&want)
	withTracingDefaults(&want)
	withBlockDefaults(&want)
	want.LiveVoices = geminilive.Voices // every prebuilt voice may be picked
	if fmt.Sprintf("%+v", c) != fmt.Sprintf("%+v", want) || string(c.AuthSecret) != testAuthSecret ||
		string(c.GeminiAPIKey) != "key-123" || string(c.RedisURL) != "redis://:pw@127.0.0.1:6379/2" ||
		string(c.OpenAIAPIKey) != "sk-proj-123" || string(c.OpenAIBaseURL) != "http://localhost:11434/v1" {
		t.Errorf("from env\n got %+v\nwant %+v", c, want)
	}
	if c.DevMode() || c.Offline() {
		t.Errorf("with secret and key: DevMode=%v Offline=%v, want both false", c.DevMode(), c.Offline())
	}
}

func TestFlagBeatsEnvironmentBeatsDefault(t *testing.T) {
	kv := map[string]string{"TURNSTILE_ADDR": "127.0.0.1:1111", "TURNSTILE_TEXT_MAX_CALLS": "7", "GEMINI_API_KEY": "from-env"}
	cases := []struct {
		name  string
		args  []string
		check func(Config) bool
	}{
		{"flag wins over env", []string{"-addr", "127.0.0.1:2222"}, func(c Config) bool { return c.Addr == "127.0.0.1:2222" }},
		{"double-dash flag", []string{"--text-max-calls=9"}, func(c Config) bool { return c.Text.MaxCalls == 9 }},
		{"env wins over default", nil, func(c Config) bool { return c.Addr == "127.0.0.1:1111" && c.Text.MaxCalls == 7 }},
		{"default when neither", nil, func(c Config) bool { return c.Voice.MaxCalls == 3 }},
		{"secret flag twin", []string{"-gemini-api-key", "from-flag"}, func(c Config) bool { return c.GeminiAPIKey == "from-flag" }},
		{"empty flag restores default", []string{"-gemini-api-key="}, func(c Config) bool { return c.Offline() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadTestConfig(t, tc.args, kv)
			if err != nil {
				t.Fatalf("LoadConfig: %v", err)
			}
			if !tc.check(c) {
				t.Errorf("unexpected config %+v", c)
			}
		})
	}
}

func TestEveryInvalidValueIsNamed(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f.txt")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ env, value, want string }{
		{"TURNSTILE_ADDR", "8080", "TURNSTILE_ADDR=8080: must be host:port"},
		{"TURNSTILE_ADDR", "127.0.0.1:99999", "TURNSTILE_ADDR=127.0.0.1:99999: port must be"},
		{"REDIS_URL", "http://127.0.0.1:6379", "REDIS_URL=http://127.0.0.1:6379: must be a redis:// or rediss://"},
		{"REDIS_URL", "redis://127.0.0.1:6379/notadb", "REDIS_URL=redis://127.0.0.1:6379/notadb: REDIS_URL is not a valid single-mode URL"},
		{"GEMINI_BASE_URL", "ftp://x", "GEMINI_BASE_URL=ftp://x: must be an absolute http"},
		{"GEMINI_BASE_URL", "/relative", "GEMINI_BASE_URL=/relative: must be an absolute"},
		{"GEMINI_BASE_URL", "http://", "GEMINI_BASE_URL=http://: has no host"},
		{"TURNSTILE_TEXT_MODEL", "gemini flash", `TURNSTILE_TEXT_MODEL="gemini flash": a model name`},
		{"TURNSTILE_LIVE_MODEL", "a\tb", `TURNSTILE_LIVE_MODEL="a\tb": a model name`},
		{"TURNSTILE_ALLOWED_ORIGINS", "https://ok.example.com,example.com", `TURNSTILE_ALLOWED_ORIGINS=https://ok.example.com,example.com: "example.com": an origin is`},
		{"TURNSTILE_ALLOWED_ORIGINS", "https://a.example.com/path", `"https://a.example.com/path": an origin is`},
		{"TURNSTILE_ALLOWED_ORIGINS", "https://a*.example.com", `"https://a*.example.com": an origin is`},
		{"TURNSTILE_KB_DIR", "/does/not/exist", "TURNSTILE_KB_DIR=/does/not/exist: cannot use folder"},
		{"TURNSTILE_KB_DIR", file, "TURNSTILE_KB_DIR=" + file + ": is not a directory"},
		{"TURNSTILE_POLICY", "/does/not/exist.yaml", "TURNSTILE_POLICY=/does/not/exist.yaml: cannot use policy file"},
		{"TURNSTILE_POLICY", file, "TURNSTILE_POLICY=" + file + ": " + file + ": unknown format: the file name must end in .yaml, .yml or .json"},
		{"TURNSTILE_POLICY", filepath.Dir(file), "TURNSTILE_POLICY=" + filepath.Dir(file) + ": is not a regular file"},
		{"TURNSTILE_VOICE_MAX_RETRIEVAL", "-1", "TURNSTILE_VOICE_MAX_RETRIEVAL=-1: must be at least 0"},
		{"TURNSTILE_VOICE_MAX_CALLS", "three", "TURNSTILE_VOICE_MAX_CALLS=three: not a whole number"},
		{"TURNSTILE_TEXT_MAX_RETRIEVAL", "1.5", "TURNSTILE_TEXT_MAX_RETRIEVAL=1.5: not a whole number"},
		{"TURNSTILE_TEXT_MAX_CALLS", "-3", "TURNSTILE_TEXT_MAX_CALLS=-3: must be at least 0"},
		{"TURNSTILE_MAX_TOOL_ITERATIONS", "many", "TURNSTILE_MAX_TOOL_ITERATIONS=many: not a whole number"},
		{"TURNSTILE_LOG_LEVEL", "verbose", "TURNSTILE_LOG_LEVEL=verbose: must be debug, info, warn or error"},
		{"TURNSTILE_SHUTDOWN_TIMEOUT", "15", "TURNSTILE_SHUTDOWN_TIMEOUT=15: not a duration"},
		{"TURNSTILE_SHUTDOWN_TIMEOUT", "0s", "TURNSTILE_SHUTDOWN_TIMEOUT=0s: must be greater than 0"},
		{"TURNSTILE_SESSION_TTL", "500ms", "TURNSTILE_SESSION_TTL=500ms: must be at least 1s"},
		{"TURNSTILE_HISTORY_MAX", "1", "TURNSTILE_HISTORY_MAX=1: must be at least 2"},
		{"TURNSTILE_MAX_MESSAGE_BYTES", "1023", "TURNSTILE_MAX_MESSAGE_BYTES=1023: must be between 1024 and 16777216"},
		{"TURNSTILE_MAX_MESSAGE_BYTES", "16777217", "TURNSTILE_MAX_MESSAGE_BYTES=16777217: must be between"},
		{"TURNSTILE_MAX_TEXT_CHARS", "0", "TURNSTILE_MAX_TEXT_CHARS=0: must be at least 1"},
		{"TURNSTILE_SEND_QUEUE_BYTES", "65535", "TURNSTILE_SEND_QUEUE_BYTES=65535: must be at least 65536"},
		{"TURNSTILE_WRITE_TIMEOUT", "-5s", "TURNSTILE_WRITE_TIMEOUT=-5s: must be greater than 0"},
		{"TURNSTILE_REDIS_TIMEOUT", "fast", "TURNSTILE_REDIS_TIMEOUT=fast: not a duration"},
		{"TURNSTILE_MODEL_TIMEOUT", "0", "TURNSTILE_MODEL_TIMEOUT=0: must be greater than 0"},
		{"TURNSTILE_AUTH_SECRET", "short", "TURNSTILE_AUTH_SECRET: must be at least 32 bytes"},
		{"GEMINI_API_KEY", "key with space", "GEMINI_API_KEY: contains whitespace"},
		{"TURNSTILE_TEXT_PROVIDER", "anthropic", "TURNSTILE_TEXT_PROVIDER=anthropic: must be gemini or openai"},
		{"OPENAI_API_KEY", "sk key", "OPENAI_API_KEY: contains whitespace"},
		{"OPENAI_BASE_URL", "ws://localhost:11434/v1", "OPENAI_BASE_URL=ws://localhost:11434/v1: must be an absolute http or https URL"},
		{"OPENAI_BASE_URL", "localhost:11434/v1", "OPENAI_BASE_URL=localhost:11434/v1: must be an absolute http or https URL"},
		{"OPENAI_BASE_URL", "http://", "OPENAI_BASE_URL=http://: has no host"},
		{"TURNSTILE_OPENAI_MODEL", "llama 3", `TURNSTILE_OPENAI_MODEL="llama 3": a model name`},
		{"TURNSTILE_OPENAI_TOOL_CHOICE", "always", "TURNSTILE_OPENAI_TOOL_CHOICE=always: must be auto, required or none"},
		{"TURNSTILE_TOOL_CHOICE", "always", "TURNSTILE_TOOL_CHOICE=always: must be auto, required or none"},
		{"TURNSTILE_ADMIN_ADDR", "9090", "TURNSTILE_ADMIN_ADDR=9090: must be host:port"},
		{"TURNSTILE_HTTP_READ_HEADER_TIMEOUT", "0s", "TURNSTILE_HTTP_READ_HEADER_TIMEOUT=0s: must be greater than 0"},
		{"TURNSTILE_HTTP_IDLE_TIMEOUT", "soon", "TURNSTILE_HTTP_IDLE_TIMEOUT=soon: not a duration"},
		{"TURNSTILE_HTTP_MAX_HEADER_BYTES", "4096", "TURNSTILE_HTTP_MAX_HEADER_BYTES=4096: must be between 8192 and 1048576"},
		{"TURNSTILE_MAX_CONNECTIONS", "0", "TURNSTILE_MAX_CONNECTIONS=0: must be at least 1"},
		{"TURNSTILE_MAX_SESSIONS", "many", "TURNSTILE_MAX_SESSIONS=many: not a whole number"},
		{"TURNSTILE_MAX_SESSIONS_PER_USER", "-1", "TURNSTILE_MAX_SESSIONS_PER_USER=-1: must be at least 0"},
		{"TURNSTILE_USER_LEASE_TTL", "500ms", "TURNSTILE_USER_LEASE_TTL=500ms: must be at least 1s"},
		{"TURNSTILE_UNAUTH_PER_IP", "-1", "TURNSTILE_UNAUTH_PER_IP=-1: must be at least 0"},
		{"TURNSTILE_UNAUTH_SHARE", "0", "TURNSTILE_UNAUTH_SHARE=0: must be more than 0 and at most 1"},
		{"TURNSTILE_UNAUTH_SHARE", "25%", "TURNSTILE_UNAUTH_SHARE=25%: not a number"},
		{"TURNSTILE_UNAUTH_SHARE", "1.5", "TURNSTILE_UNAUTH_SHARE=1.5: must be more than 0 and at most 1"},
		{"TURNSTILE_UNAUTH_IDLE_TIMEOUT", "0s", "TURNSTILE_UNAUTH_IDLE_TIMEOUT=0s: must be at least 1ms"},
		{"TURNSTILE_AUTH_MAX_TTL", "30s", "TURNSTILE_AUTH_MAX_TTL=30s: must be at least 1m0s"},
		{"TURNSTILE_AUTH_LEEWAY", "-1s", "TURNSTILE_AUTH_LEEWAY=-1s: must be greater than 0"},
		{"TURNSTILE_AUTH_AUDIENCE", " turnstile", `TURNSTILE_AUTH_AUDIENCE=" turnstile": has control characters or surrounding blanks`},
		{"TURNSTILE_AUTH_ISSUER", "a\nb", `TURNSTILE_AUTH_ISSUER="a\nb": has control characters`},
		{"TURNSTILE_AUTH_JWKS_URL", "http://idp.example.com/jwks", "TURNSTILE_AUTH_JWKS_URL=http://idp.example.com/jwks: http:// is only allowed for a loopback host"},
		{"TURNSTILE_AUTH_JWKS_URL", "idp.example.com/jwks", "TURNSTILE_AUTH_JWKS_URL=idp.example.com/jwks: must be an absolute URL"},
		{"TURNSTILE_AUTH_JWKS_REFRESH", "10ms", "TURNSTILE_AUTH_JWKS_REFRESH=10ms: must be at least 1s"},
		{"TURNSTILE_MESSAGE_RATE", "fast", "TURNSTILE_MESSAGE_RATE=fast: not a number"},
		{"TURNSTILE_MESSAGE_RATE", "0", "TURNSTILE_MESSAGE_RATE=0: must be at least 0.01"},
		{"TURNSTILE_MESSAGE_RATE", "NaN", "TURNSTILE_MESSAGE_RATE=NaN: not a number"},
		{"TURNSTILE_MESSAGE_BURST", "0", "TURNSTILE_MESSAGE_BURST=0: must be at least 1"},
		{"TURNSTILE_RATE_ABUSE_AFTER", "0s", "TURNSTILE_RATE_ABUSE_AFTER=0s: must be greater than 0"},
		{"TURNSTILE_MIC_PACE", "0.5", "TURNSTILE_MIC_PACE=0.5: must be at least 1"},
		{"TURNSTILE_ABUSE_COOLDOWN", "-1s", "TURNSTILE_ABUSE_COOLDOWN=-1s: must not be negative"},
		{"TURNSTILE_ABUSE_COOLDOWN", "2h", "TURNSTILE_ABUSE_COOLDOWN=2h: must not exceed TURNSTILE_ABUSE_COOLDOWN_MAX=1h"},
		{"TURNSTILE_ABUSE_COOLDOWN_MAX", "0s", "TURNSTILE_ABUSE_COOLDOWN_MAX=0s: must be at least 1s"},
		{"TURNSTILE_ABUSE_COOLDOWN_MEMORY", "later", "TURNSTILE_ABUSE_COOLDOWN_MEMORY=later: not a duration"},
		{"TURNSTILE_TURNS_PER_MINUTE", "-1", "TURNSTILE_TURNS_PER_MINUTE=-1: must be at least 0"},
		{"TURNSTILE_VOICE_STARTS_PER_MINUTE", "many", "TURNSTILE_VOICE_STARTS_PER_MINUTE=many: not a whole number"},
		{"TURNSTILE_CONTEXT_MAX_TOKENS", "999", "TURNSTILE_CONTEXT_MAX_TOKENS=999: must be at least 1000"},
		{"TURNSTILE_HISTORY_MAX_BYTES", "1000", "TURNSTILE_HISTORY_MAX_BYTES=1000: must be at least 16384"},
		{"TURNSTILE_RESUME_HISTORY_MAX", "0", "TURNSTILE_RESUME_HISTORY_MAX=0: must be at least 1"},
		{"TURNSTILE_AUTH_LEEWAY", "30", "TURNSTILE_AUTH_LEEWAY=30: not a duration"},
		{"TURNSTILE_PING_INTERVAL", "0s", "TURNSTILE_PING_INTERVAL=0s: must be at least 1ms"},
		{"TURNSTILE_IDLE_TIMEOUT", "20s", "TURNSTILE_IDLE_TIMEOUT=20s: must be longer than TURNSTILE_PING_INTERVAL=30s"},
		{"TURNSTILE_PUBLIC_URL", "gw.example.com", "TURNSTILE_PUBLIC_URL=gw.example.com: must be an http or https URL"},
		{"TURNSTILE_PUBLIC_URL", "wss://gw.example.com", "TURNSTILE_PUBLIC_URL=wss://gw.example.com: must be an http or https URL"},
		{"TURNSTILE_PUBLIC_URL", "https://gw.example.com/?a=1", "must be scheme://host[:port][/path], without user, query or fragment"},
		{"TWILIO_AUTH_TOKEN", "tok en", "TWILIO_AUTH_TOKEN: contains whitespace"},
	}
	for _, tc := range cases {
		t.Run(tc.env+"="+tc.value, func(t *testing.T) {
			_, err := loadTestConfig(t, nil, map[string]string{tc.env: tc.value})
			if err == nil {
				t.Fatalf("%s=%q accepted", tc.env, tc.value)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error does not say %q:\n%v", tc.want, err)
			}
		})
	}
}

func TestMaxToolIterationsBelowOneIsTakenAsOneWithAWarning(t *testing.T) {
	for _, v := range []string{"0", "-3"} {
		cfg, err := loadTestConfig(t, nil, map[string]string{"TURNSTILE_MAX_TOOL_ITERATIONS": v})
		if err != nil {
			t.Fatalf("TURNSTILE_MAX_TOOL_ITERATIONS=%s refused: %v", v, err)
		}
		want := "TURNSTILE_MAX_TOOL_ITERATIONS=" + v + " is below 1: using 1"
		if cfg.MaxToolIterations != 1 || len(cfg.Warnings) != 1 || cfg.Warnings[0] != want {
			t.Errorf("=%s: MaxToolIterations %d, warnings %q; want 1 and %q", v, cfg.MaxToolIterations, cfg.Warnings, want)
		}
	}
	if cfg, err := loadTestConfig(t, nil, nil); err != nil || len(cfg.Warnings) != 0 {
		t.Errorf("defaults: warnings %q, err %v; want none", cfg.Warnings, err)
	}
}

func TestFlagErrorNamesFlagAndVariable(t *testing.T) {
	_, err := loadTestConfig(t, []string{"-max-text-chars", "0"}, map[string]string{"TURNSTILE_MAX_TEXT_CHARS": "5"})
	want := "-max-text-chars (TURNSTILE_MAX_TEXT_CHARS)=0: must be at least 1"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("want error containing %q, got %v", want, err)
	}
}

// withEdgeDefaults sets the edge settings' defaults on a Config, the caps
// derived from this process's open-file limit as LoadConfig derives them.
func withEdgeDefaults(c *Config) {
	c.AdminAddr = "127.0.0.1:9090"
	c.HTTPReadHeaderTimeout, c.HTTPIdleTimeout, c.HTTPMaxHeaderBytes = 5*time.Second, time.Minute, 16<<10
	c.FileLimit = openFileLimit()
	c.MaxConnections = unknownFileLimitConnections
	if c.FileLimit > 0 {
		c.MaxConnections = connectionRoom(c.FileLimit)
	}
	c.MaxSessions = min(10000, c.MaxConnections*9/10)
	c.MaxSessionsPerUser, c.UserLeaseTTL = 10, 30*time.Second
	c.AuthMaxTTL, c.AuthLeeway, c.AuthJWKSRefresh = 24*time.Hour, 30*time.Second, 15*time.Minute
	c.UnauthPerIP, c.UnauthShare, c.UnauthIdleTimeout = 32, 0.25, 10*time.Second
}

func TestTwoExplicitBudgetsThatConflictAreRefused(t *testing.T) {
	_, err := loadTestConfig(t, nil, map[string]string{"TURNSTILE_VOICE_MAX_RETRIEVAL": "4", "TURNSTILE_VOICE_MAX_CALLS": "3",
		"TURNSTILE_TEXT_MAX_RETRIEVAL": "5", "TURNSTILE_TEXT_MAX_CALLS": "4"})
	for _, want := range []string{
		"TURNSTILE_VOICE_MAX_RETRIEVAL=4: must not exceed TURNSTILE_VOICE_MAX_CALLS=3",
		"TURNSTILE_TEXT_MAX_RETRIEVAL=5: must not exceed TURNSTILE_TEXT_MAX_CALLS=4",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want error containing %q, got %v", want, err)
		}
	}
}

func TestAnExplicitBudgetClampsAConflictingDefaultWithAWarning(t *testing.T) {
	c, err := loadTestConfig(t, nil, map[string]string{"TURNSTILE_TEXT_MAX_CALLS": "2", "TURNSTILE_VOICE_MAX_RETRIEVAL": "4"})
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	if c.Text.MaxCalls != 2 || c.Text.MaxRetrieval != 2 {
		t.Errorf("text budget calls %d retrieval %d, want the retrieval default lowered to 2", c.Text.MaxCalls, c.Text.MaxRetrieval)
	}
	if c.Voice.MaxRetrieval != 4 || c.Voice.MaxCalls != 4 {
		t.Errorf("voice budget calls %d retrieval %d, want the calls default raised to 4", c.Voice.MaxCalls, c.Voice.MaxRetrieval)
	}
	warnings := strings.Join(c.Warnings, "\n")
	for _, want := range []string{
		"TURNSTILE_TEXT_MAX_CALLS=2: the default TURNSTILE_TEXT_MAX_RETRIEVAL lowered to 2",
		"TURNSTILE_VOICE_MAX_RETRIEVAL=4: the default TURNSTILE_VOICE_MAX_CALLS raised to 4",
	} {
		if !strings.Contains(warnings, want) {
			t.Errorf("warnings %q lack %q", warnings, want)
		}
	}
}

func TestConnectionRoomBelowTheFileLimit(t *testing.T) {
	for limit, want := range map[uint64]int{0: 0, 256: 0, 258: 2, 1024: 768, 20000: 19744, 1 << 20: 1048320} {
		if got := connectionRoom(limit); got != want {
			t.Errorf("connectionRoom(%d) = %d, want %d", limit, got, want)
		}
	}
}

func TestEdgeCapsAreCheckedAgainstTheFileLimitAndEachOther(t *testing.T) {
	limit := openFileLimit()
	if limit == 0 {
		t.Skip("no open-file limit to check against here")
	}
	room := connectionRoom(limit)
	_, err := loadTestConfig(t, nil, map[string]string{"TURNSTILE_MAX_CONNECTIONS": fmt.Sprint(room + 1)})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("TURNSTILE_MAX_CONNECTIONS=%d: leaves no room below the open-file limit (RLIMIT_NOFILE %d): at most %d", room+1, limit, room)) {
		t.Errorf("a cap beyond the file limit: %v", err)
	}
	c, err := loadTestConfig(t, nil, map[string]string{"TURNSTILE_MAX_CONNECTIONS": "100"})
	if err != nil || c.MaxConnections != 100 || c.MaxSessions != 90 {
		t.Errorf("MaxConnections=100: (%d, %d, %v), want the session default at 90", c.MaxConnections, c.MaxSessions, err)
	}
	_, err = loadTestConfig(t, nil, map[string]string{"TURNSTILE_MAX_CONNECTIONS": "100", "TURNSTILE_MAX_SESSIONS": "101"})
	if err == nil || !strings.Contains(err.Error(), "TURNSTILE_MAX_SESSIONS=101: would never be reached") {
		t.Errorf("sessions above connections: %v", err)
	}
	_, err = loadTestConfig(t, nil, map[string]string{"TURNSTILE_ADDR": "127.0.0.1:7000", "TURNSTILE_ADMIN_ADDR": "127.0.0.1:7000"})
	if err == nil || !strings.Contains(err.Error(), "TURNSTILE_ADMIN_ADDR=127.0.0.1:7000: must differ from TURNSTILE_ADDR") {
		t.Errorf("admin on the public address: %v", err)
	}
	_, err = loadTestConfig(t, nil, map[string]string{"TURNSTILE_ADMIN_ADDR": "0.0.0.0:9090"})
	if err == nil || !strings.Contains(err.Error(), "TURNSTILE_ADMIN_ADDR=0.0.0.0:9090: is not loopback, so TURNSTILE_ADMIN_TOKEN") {
		t.Errorf("admin beyond loopback without a token: %v", err)
	}
	_, err = loadTestConfig(t, nil, map[string]string{"TURNSTILE_ADMIN_ADDR": "0.0.0.0:9090", "TURNSTILE_ADMIN_TOKEN": "short"})
	if err == nil || !strings.Contains(err.Error(), "TURNSTILE_ADMIN_TOKEN: must be at least 32 bytes") || strings.Contains(err.Error(), "short") {
		t.Errorf("a short admin token (never echoed): %v", err)
	}
	token := strings.Repeat("t", 32)
	c, err = loadTestConfig(t, nil, map[string]string{"TURNSTILE_ADMIN_ADDR": "0.0.0.0:9090", "TURNSTILE_ADMIN_TOKEN": token})
	if err != nil || string(c.AdminToken) != token || len(c.Warnings) != 0 {
		t.Errorf("admin beyond loopback with a token: %v, warnings %q", err, c.Warnings)
	}
	c, err = loadTestConfig(t, nil, map[string]string{"TURNSTILE_ADMIN_ADDR": "0.0.0.0:9090", "TURNSTILE_ADMIN_TOKEN": token,
		"TURNSTILE_ADMIN_METRICS_OPEN": "true"})
	if err != nil || !strings.Contains(strings.Join(c.Warnings, "\n"), "TURNSTILE_ADMIN_METRICS_OPEN is true: /metrics answers whoever") {
		t.Errorf("metrics left open beyond loopback: %v, warnings %q", err, c.Warnings)
	}
}

func TestAJWKSAloneTurnsAuthOn(t *testing.T) {
	c, err := loadTestConfig(t, nil, map[string]string{"TURNSTILE_ADDR": "0.0.0.0:8080", "GEMINI_API_KEY": "key",
		"TURNSTILE_AUTH_JWKS_URL": "https://idp.example.com/.well-known/jwks.json", "TURNSTILE_AUTH_AUDIENCE": "turnstile"})
	if err != nil || c.DevMode() || c.AuthAudience != "turnstile" {
		t.Fatalf("(%v, dev mode %v, audience %q)", err, c.DevMode(), c.AuthAudience)
	}
}

func TestAllProblemsReportedAtOnce(t *testing.T) {
	_, err := loadTestConfig(t, nil, map[string]string{
		"TURNSTILE_ADDR":              "nope",
		"TURNSTILE_LOG_LEVEL":         "loud",
		"TURNSTILE_HISTORY_MAX":       "0",
		"TURNSTILE_SEND_QUEUE_BYTES":  "1",
		"TURNSTILE_VOICE_MAX_CALLS":   "x",
		"TURNSTILE_MAX_MESSAGE_BYTES": "1",
	})
	if err == nil {
		t.Fatal("invalid configuration accepted")
	}
	for _, name := range []string{"TURNSTILE_ADDR=nope", "TURNSTILE_LOG_LEVEL=loud", "TURNSTILE_HISTORY_MAX=0",
		"TURNSTILE_SEND_QUEUE_BYTES=1", "TURNSTILE_VOICE_MAX_CALLS=x", "TURNSTILE_MAX_MESSAGE_BYTES=1"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error misses %s:\n%v", name, err)
		}
	}
	// VOICE_MAX_CALLS failed to parse, so the retrieval≤calls rule must not add a confusing second error.
	if strings.Contains(err.Error(), "must not exceed") {
		t.Errorf("cross-check ran on an unparsed value:\n%v", err)
	}
	if n := len(strings.Split(strings.TrimSpace(err.Error()), "\n")); n != 6 {
		t.Errorf("want 6 problem lines, got %d lines:\n%v", n, err)
	}
}

func TestSecretsNeverShown(t *testing.T) {
	const key, shortSecret = "AIzaSy-very-secret key", "hunter2-short-secret"
	_, err := loadTestConfig(t, []string{"-auth-secret", shortSecret}, map[string]string{
		"GEMINI_API_KEY": key,
		"REDIS_URL":      "redis://:redispw@127.0.0.1:6379/x",
	})
	if err == nil {
		t.Fatal("invalid secrets accepted")
	}
	for _, secret := range []string{key, shortSecret, "redispw"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error text reveals %q:\n%v", secret, err)
		}
	}
	for _, name := range []string{"GEMINI_API_KEY", "TURNSTILE_AUTH_SECRET", "REDIS_URL"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s:\n%v", name, err)
		}
	}
	// An unparseable URL may carry a password in any position; it is not echoed at all.
	_, err = loadTestConfig(t, nil, map[string]string{"REDIS_URL": "redis://:bad pw@127.0.0.1"})
	if err == nil || strings.Contains(err.Error(), "bad pw") || !strings.Contains(err.Error(), "REDIS_URL") {
		t.Errorf("unparseable REDIS_URL: %v", err)
	}

	c, err := loadTestConfig(t, nil, map[string]string{
		"GEMINI_API_KEY": "AIzaSy-valid-key", "TURNSTILE_AUTH_SECRET": testAuthSecret,
		"REDIS_URL": "redis://user:redispw@127.0.0.1:6379/0",
	})
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "config", c)
	var texts = []string{buf.String(), fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c),
		fmt.Sprintf("%s %q %x", c.AuthSecret, c.GeminiAPIKey, c.AuthSecret)}
	js, _ := json.Marshal(c)
	texts = append(texts, string(js))
	for _, text := range texts {
		for _, secret := range []string{"AIzaSy-valid-key", testAuthSecret, "redispw"} {
			if strings.Contains(text, secret) {
				t.Errorf("output reveals %q: %s", secret, text)
			}
		}
	}
	var rec struct{ Config map[string]any }
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("log line: %v", err)
	}
	for k, want := range map[string]any{"gemini_api_key": "set", "auth_secret": "set", "addr": "127.0.0.1:8080",
		"dev_mode": false, "offline": false, "kb_dir": "embedded", "text_max_calls": 10.0,
		"redis": "redis://user:xxxxx@127.0.0.1:6379/0", "gemini_base_url": "google"} {
		if rec.Config[k] != want {
			t.Errorf("logged %s = %v, want %v (log: %s)", k, rec.Config[k], want, buf.String())
		}
	}
}

func TestOpenAITextProviderIsOfflineOnlyWithoutKeyAndBaseURL(t *testing.T) {
	cases := []struct {
		name          string
		env           map[string]string
		offline, live bool // text offline, Gemini (voice) offline
	}{
		{"openai with nothing", map[string]string{"TURNSTILE_TEXT_PROVIDER": "openai"}, true, true},
		{"openai with a local server", map[string]string{"TURNSTILE_TEXT_PROVIDER": "openai", "OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}, false, true},
		{"openai with a key", map[string]string{"TURNSTILE_TEXT_PROVIDER": "openai", "OPENAI_API_KEY": "sk-1"}, false, true},
		{"openai and gemini keys", map[string]string{"TURNSTILE_TEXT_PROVIDER": "openai", "OPENAI_API_KEY": "sk-1", "GEMINI_API_KEY": "g"}, false, false},
		{"gemini ignores openai settings", map[string]string{"OPENAI_API_KEY": "sk-1"}, true, true},
		{"gemini with its key", map[string]string{"GEMINI_API_KEY": "g", "TURNSTILE_TEXT_PROVIDER": "gemini"}, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadTestConfig(t, nil, tc.env)
			if err != nil {
				t.Fatalf("LoadConfig: %v", err)
			}
			if c.Offline() != tc.offline || c.GeminiOffline() != tc.live {
				t.Errorf("Offline=%v GeminiOffline=%v, want %v and %v", c.Offline(), c.GeminiOffline(), tc.offline, tc.live)
			}
		})
	}
}

func TestOpenAISecretsNeverShown(t *testing.T) {
	_, err := loadTestConfig(t, []string{"-openai-api-key", "sk-secret with-space"}, map[string]string{
		"OPENAI_BASE_URL": "ftp://user:basepw@proxy.internal/v1"})
	if err == nil || strings.Contains(err.Error(), "sk-secret") || strings.Contains(err.Error(), "basepw") ||
		!strings.Contains(err.Error(), "-openai-api-key (OPENAI_API_KEY): contains whitespace") {
		t.Fatalf("errors = %v, want both settings named and neither secret shown", err)
	}
	c, err := loadTestConfig(t, nil, map[string]string{"TURNSTILE_TEXT_PROVIDER": "openai", "OPENAI_API_KEY": "sk-valid-secret",
		"OPENAI_BASE_URL": "https://user:basepw@llm.internal/v1"})
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "config", c)
	js, _ := json.Marshal(c)
	for _, text := range []string{buf.String(), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), string(js)} {
		if strings.Contains(text, "sk-valid-secret") || strings.Contains(text, "basepw") {
			t.Errorf("output reveals a secret: %s", text)
		}
	}
	var rec struct{ Config map[string]any }
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("log line: %v", err)
	}
	for k, want := range map[string]any{"text_provider": "openai", "openai_api_key": "set", "offline": false,
		"openai_base_url": "https://user:xxxxx@llm.internal/v1", "openai_model": "gpt-4o-mini", "tool_choice": "auto"} {
		if rec.Config[k] != want {
			t.Errorf("logged %s = %v, want %v", k, rec.Config[k], want)
		}
	}
}

func TestDevModeRefusedOffLoopback(t *testing.T) {
	cases := []struct {
		addr   string
		secret string
		ok     bool
	}{
		{"0.0.0.0:8080", "", false},
		{":8080", "", false},
		{"[::]:8080", "", false},
		{"192.168.1.10:8080", "", false},
		{"gateway.internal:8080", "", false},
		{"0.0.0.0:8080", testAuthSecret, true},
		{"127.0.0.1:8080", "", true},
		{"127.9.9.9:0", "", true},
		{"[::1]:8080", "", true},
		{"LocalHost:8080", "", true},
	}
	for _, tc := range cases {
		t.Run(tc.addr+"/secret="+fmt.Sprint(tc.secret != ""), func(t *testing.T) {
			_, err := loadTestConfig(t, nil, map[string]string{"TURNSTILE_ADDR": tc.addr, "TURNSTILE_AUTH_SECRET": tc.secret,
				"GEMINI_API_KEY": "k"})
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && (err == nil || !strings.Contains(err.Error(), "TURNSTILE_AUTH_SECRET is unset") ||
				!strings.Contains(err.Error(), "not loopback")) {
				t.Fatalf("want dev-mode refusal, got %v", err)
			}
		})
	}
}

func TestHelpListsEverySetting(t *testing.T) {
	var out bytes.Buffer
	_, err := loadConfig([]string{"-h"}, nil, &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: got %v, want flag.ErrHelp", err)
	}
	for _, s := range configSettings() {
		line := fmt.Sprintf("-%s, %s (default: ", settings.FlagName(s.Env), s.Env)
		if !strings.Contains(out.String(), line) {
			t.Errorf("usage lacks %q", line)
		}
	}
	for _, want := range []string{"(default: 127.0.0.1:8080)", "(default: 20)", "unset: dev mode", "flag beats the environment"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, out.String())
		}
	}
}

func TestFlagNamesDeriveFromVariables(t *testing.T) {
	for env, want := range map[string]string{
		"TURNSTILE_ADDR": "addr", "GEMINI_API_KEY": "gemini-api-key", "REDIS_URL": "redis-url",
		"TURNSTILE_MAX_TOOL_ITERATIONS": "max-tool-iterations",
	} {
		if got := settings.FlagName(env); got != want {
			t.Errorf("settings.FlagName(%s) = %s, want %s", env, got, want)
		}
	}
	for _, s := range configSettings() {
		if _, err := loadTestConfig(t, []string{"-" + settings.FlagName(s.Env) + "=" + s.Def}, nil); err != nil {
			t.Errorf("flag twin of %s with its default: %v", s.Env, err)
		}
	}
}

func TestBadArgumentsRefused(t *testing.T) {
	for _, args := range [][]string{{"-no-such-flag"}, {"serve"}} {
		if _, err := loadTestConfig(t, args, nil); err == nil || errors.Is(err, flag.ErrHelp) {
			t.Errorf("%v: got %v, want an error", args, err)
		}
	}
}

func TestLoadConfigLoadsPolicyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	policy := "budgets:\n  voice: {maxRetrieval: 1, maxCalls: 2}\ntools:\n  kb_get: {timeoutMs: 1500}\n"
	if err := os.WriteFile(path, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		args []string
		env  map[string]string
	}{
		"environment": {nil, map[string]string{"TURNSTILE_POLICY": path}},
		"flag":        {[]string{"-policy", path}, map[string]string{"TURNSTILE_POLICY": "/elsewhere.yaml"}},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := loadTestConfig(t, c.args, c.env)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.PolicyFile != path || cfg.Policy == nil {
				t.Fatalf("PolicyFile = %q, Policy = %v", cfg.PolicyFile, cfg.Policy)
			}
			if b, ok := cfg.Policy.Budget("voice"); !ok || b.MaxRetrieval != 1 || b.MaxCalls != 2 {
				t.Errorf("voice budget = %+v, %v", b, ok)
			}
			if o := cfg.Policy.Tools["kb_get"]; o.TimeoutMs == nil || *o.TimeoutMs != 1500 {
				t.Errorf("kb_get override = %+v", o)
			}
		})
	}
	cfg, err := loadTestConfig(t, nil, nil)
	if err != nil || cfg.Policy != nil || cfg.PolicyFile != "" {
		t.Errorf("without TURNSTILE_POLICY: Policy = %v, PolicyFile = %q, err = %v", cfg.Policy, cfg.PolicyFile, err)
	}
}

func TestLoadConfigNamesEveryPolicyProblem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.json")
	policy := "{\"budgets\": {\"text\": {\"maxRetrieval\": 6, \"maxCalls\": 5}},\n \"tools\": {\"kb_get\": {\"modes\": [\"fax\"]}}}"
	if err := os.WriteFile(path, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := loadTestConfig(t, nil, map[string]string{"TURNSTILE_POLICY": path, "TURNSTILE_MAX_TEXT_CHARS": "0"})
	if err == nil {
		t.Fatal("an invalid policy was accepted")
	}
	for _, want := range []string{
		"TURNSTILE_POLICY=" + path + ": " + path + ":1: budgets.text: maxRetrieval (6) must not exceed maxCalls (5)",
		path + ":2: tools.kb_get.modes[0]: unknown mode",
		"TURNSTILE_MAX_TEXT_CHARS=0: must be at least 1",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

// TestEverySettingHasARowInConfigurationMD: docs/configuration.md lists each
// setting with its flag, and nothing the gateway does not know.
func TestEverySettingHasARowInConfigurationMD(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	known := map[string]bool{}
	for _, s := range configSettings() {
		known[s.Env] = true
		if row := "| `" + s.Env + "` | `-" + settings.FlagName(s.Env) + "` |"; !strings.Contains(doc, row) {
			t.Errorf("docs/configuration.md has no row starting %q", row)
		}
	}
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Z][A-Z0-9_]+)` \\| `-").FindAllStringSubmatch(doc, -1) {
		if !known[m[1]] {
			t.Errorf("docs/configuration.md lists %s, which is not a setting", m[1])
		}
	}
}

func TestToolChoiceTakesItsOlderOpenAINameAndRefusesAConflict(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		want    string
		wantErr string
	}{
		{map[string]string{}, "auto", ""},
		{map[string]string{"TURNSTILE_TOOL_CHOICE": "None"}, "none", ""},
		{map[string]string{"TURNSTILE_OPENAI_TOOL_CHOICE": "required"}, "required", ""},
		{map[string]string{"TURNSTILE_TOOL_CHOICE": "none", "TURNSTILE_OPENAI_TOOL_CHOICE": "none"}, "none", ""},
		{map[string]string{"TURNSTILE_TOOL_CHOICE": "none", "TURNSTILE_OPENAI_TOOL_CHOICE": "required"}, "",
			"TURNSTILE_OPENAI_TOOL_CHOICE=required: conflicts with TURNSTILE_TOOL_CHOICE=none (its older name); set only TURNSTILE_TOOL_CHOICE"},
	} {
		c, err := LoadConfig(nil, func(k string) string { return tc.env[k] })
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%v: error %v, want %q", tc.env, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || c.ToolChoice != tc.want):
			t.Errorf("%v: tool choice %q (%v), want %q", tc.env, c.ToolChoice, err, tc.want)
		}
	}
}

func TestConnectBudgetSettingsRefuseANegativeCount(t *testing.T) {
	for _, env := range []string{"TURNSTILE_LIVE_CONNECTS_PER_MINUTE", "TURNSTILE_USER_LIVE_CONNECTS_PER_MINUTE",
		"TURNSTILE_RESUMES_PER_MINUTE", "TURNSTILE_USER_RESUMES_PER_MINUTE"} {
		_, err := loadConfig(nil, func(k string) string {
			if k == env {
				return "-1"
			}
			return ""
		}, new(strings.Builder))
		if err == nil || !strings.Contains(err.Error(), env) {
			t.Errorf("%s=-1: %v, want an error naming the setting", env, err)
		}
	}
}

// withTracingDefaults sets what no OTEL_* variable gives: tracing off.
func withTracingDefaults(c *Config) {
	c.Tracing = tracing.Settings{Protocol: tracing.ProtocolHTTP, MaxQueueSize: tracing.DefaultMaxQueueSize}
}
