// Command gateway runs Turnstile: configuration from flags and environment,
// everything wired together, served until SIGINT/SIGTERM, then drained.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Set at build time with -ldflags "-X main.version=… -X main.commit=…".
var (
	version = "dev"
	commit  = "unknown"
)

func main() {
	os.Exit(realMain(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func realMain(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "token" {
		return tokenCommand(args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "tools" {
		return toolsCommand(args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "version" {
		return versionCommand(args[1:], stdout, stderr)
	}
	cfg, err := loadConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "gateway: invalid configuration:\n%v\n", err)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	// go-redis logs each failed dial on its own; route it through slog at
	// debug level (failures surface as store errors, counted and logged).
	redis.SetLogger(redisLogger{log})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg, log); err != nil {
		log.Error("gateway stopped with an error", "err", err)
		return 1
	}
	return 0
}

// serve runs the gateway until ctx ends, then drains within the shutdown
// timeout.
func serve(ctx context.Context, cfg Config, log *slog.Logger) error {
	v, c := buildVersion()
	log.Info("starting turnstile gateway", "version", v, "commit", c, "config", cfg)
	reg := prometheus.NewRegistry()
	gw, err := assemble(ctx, cfg, reg, log, brains{})
	if err != nil {
		return err
	}
	defer gw.close()

	if cfg.PprofAddr != "" {
		stop, err := startPprof(cfg.PprofAddr, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on TURNSTILE_ADDR=%s: %w", cfg.Addr, err)
	}
	httpSrv := &http.Server{Handler: gw.edge.Handler(), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	serveErr := make(chan error, 1)
	go func() { serveErr <- httpSrv.Serve(ln) }()
	log.Info("gateway listening", "url", "http://"+ln.Addr().String()+"/", "dev_mode", cfg.DevMode(),
		"offline_demo_model", cfg.Offline())

	select {
	case err := <-serveErr:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: draining sessions", "deadline", cfg.ShutdownTimeout, "sessions", gw.sessions.Active())
	gw.edge.SetDraining()
	dctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	gw.sessions.Drain(dctx)
	if err := httpSrv.Shutdown(dctx); err != nil {
		log.Warn("http shutdown did not finish in time", "err", err)
		_ = httpSrv.Close()
	}
	<-serveErr
	log.Info("gateway stopped")
	return nil
}

// redisLogger adapts slog to go-redis's internal logger.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.Debug("redis client: " + fmt.Sprintf(format, v...))
}
