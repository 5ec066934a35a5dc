package gateway

// The process's own settings, which no package below the gateway reads: the
// log level, how long a drain may take, and the profiling listener (the
// demo model's is in config_production.go).

import (
	"errors"
	"strings"
	"time"

	"github.com/turnstile-gw/turnstile/internal/settings"
	"github.com/turnstile-gw/turnstile/server"
)

func logLevelSetting() configSetting {
	return configSetting{Env: "TURNSTILE_LOG_LEVEL", Def: "info", Usage: "log level: debug, info, warn or error",
		Apply: func(c *Config, v string) error {
			switch strings.ToLower(v) {
			case "debug", "info", "warn", "error":
				return c.LogLevel.UnmarshalText([]byte(v))
			}
			return errors.New("must be debug, info, warn or error")
		}}
}

func shutdownTimeoutSetting() configSetting {
	return settings.Duration("TURNSTILE_SHUTDOWN_TIMEOUT", "15s", "how long to drain sessions after SIGTERM", time.Nanosecond,
		func(c *Config) *time.Duration { return &c.ShutdownTimeout })
}

func voiceLoopSetting() configSetting {
	return configSetting{Env: "TURNSTILE_VOICE_LOOP", Def: "true",
		Usage: "serve voice sessions' sockets (plain TCP, Linux) from event loops, one per CPU, relaying audio where it is read; false: a goroutine per socket, as over TLS (docs/operations.md)",
		Apply: settings.Bool(func(c *Config) *bool { return &c.VoiceLoop })}
}

func pprofSetting() configSetting {
	return configSetting{Env: "TURNSTILE_PPROF_ADDR", DefDoc: "unset: off",
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
		}}
}
