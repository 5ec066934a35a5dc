package gateway

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/internal/cli"
	"github.com/turnstile-gw/turnstile/internal/logescape"
	"github.com/turnstile-gw/turnstile/tracing"
)

// Main is the gateway binary's command line: with no subcommand it loads
// the configuration from args and getenv, serves until SIGINT or SIGTERM,
// drains and returns the exit status (2: invalid configuration, 1: the
// gateway stopped with an error); SIGHUP reloads TURNSTILE_TOOLS_DIR. The
// subcommands are token, tools, call, script, events, version and sleep.
func Main(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "token":
			return cli.Token(args[1:], getenv, stdout, stderr)
		case "tools":
			return toolsCommand(args[1:], getenv, stdout, stderr)
		case "call":
			return cli.Call(args[1:], getenv, stdout, stderr)
		case "script":
			return scriptCommand(args[1:], getenv, stdout, stderr)
		case "events":
			return cli.Events(args[1:], getenv, stdout, stderr)
		case "version":
			return versionCommand(args[1:], stdout, stderr)
		case "sleep":
			return cli.Sleep(args[1:], stderr)
		}
	}
	cfg, err := loadConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "gateway: invalid configuration:\n%v\n", err)
		return 2
	}
	handler := LogHandler(stderr, cfg.LogLevel)
	if cfg.Tracing.Enabled {
		handler = tracing.LogHandler(handler) // trace_id and span_id on the lines of a turn
	}
	log := slog.New(handler)
	// go-redis logs each failed dial on its own; route it through slog at
	// debug level (failures surface as store errors, counted and logged).
	redis.SetLogger(redisLogger{log})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	for _, w := range cfg.Warnings {
		log.Warn("setting adjusted: " + w)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP) // reload TURNSTILE_TOOLS_DIR (tools_reload.go)
	defer signal.Stop(hup)
	if err := serve(ctx, cfg, log, hup); err != nil {
		log.Error("gateway stopped with an error", "err", err)
		// Also plainly, for whoever reads a terminal rather than JSON.
		fmt.Fprintf(stderr, "gateway: %v\n", err)
		return 1
	}
	return 0
}

// LogHandler is the gateway's log: JSON lines at level, durations as Go
// durations, and client-supplied text (user ids, headers, key ids in
// errors) with bidi overrides and other invisible characters escaped.
func LogHandler(w io.Writer, level slog.Leveler) slog.Handler {
	return slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		return logescape.ReplaceAttr(groups, goDurations(groups, a))
	}})
}

// goDurations writes durations as Go durations ("20s"), where slog's JSON
// would write nanoseconds: an operator reads them back as the settings
// they came from.
func goDurations(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// redisLogger adapts slog to go-redis's internal logger.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.Debug("redis client: " + fmt.Sprintf(format, v...))
}
