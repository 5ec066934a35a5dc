// Command gateway runs Turnstile: configuration from flags and environment,
// everything wired together, served until SIGINT/SIGTERM, then drained.
package main

import (
	"context"
	"crypto/tls"
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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/internal/logescape"
	"github.com/turnstile-gw/turnstile/server"
	"github.com/turnstile-gw/turnstile/tracing"
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
	if len(args) > 0 && args[0] == "call" {
		return callCommand(args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "script" {
		return scriptCommand(args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "events" {
		return eventsCommand(args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "version" {
		return versionCommand(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "sleep" {
		return sleepCommand(args[1:], stderr)
	}
	cfg, err := loadConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "gateway: invalid configuration:\n%v\n", err)
		return 2
	}
	handler := logHandler(stderr, cfg.LogLevel)
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
	if err := serve(ctx, cfg, log); err != nil {
		log.Error("gateway stopped with an error", "err", err)
		// Also plainly, for whoever reads a terminal rather than JSON.
		fmt.Fprintf(stderr, "gateway: %v\n", err)
		return 1
	}
	return 0
}

// logHandler is the gateway's log: JSON lines, durations as Go durations,
// and client-supplied text (user ids, headers, key ids in errors) with
// bidi overrides and other invisible characters escaped (logescape).
func logHandler(w io.Writer, level slog.Leveler) slog.Handler {
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
	l, err := listen(cfg, gw, log)
	if err != nil {
		return err
	}
	log.Info("gateway listening", "url", l.scheme+"://"+l.publicAddr.String()+"/", "admin_url", l.scheme+"://"+l.adminAddr.String()+"/",
		"dev_mode", cfg.DevMode(), "offline_demo_model", cfg.Offline(), "max_connections", cfg.MaxConnections,
		"max_sessions", cfg.MaxSessions, "max_sessions_per_user", cfg.MaxSessionsPerUser)

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP) // reload TURNSTILE_TOOLS_DIR (tools_reload.go)
	defer signal.Stop(hup)
	rctx, stopReloads := context.WithCancel(ctx)
	reloads := make(chan struct{})
	go func() { defer close(reloads); watchReloads(rctx, gw.toolsReload, hup, log) }()
	defer func() { stopReloads(); <-reloads }()

	var stopErr error
	select {
	case err := <-l.errs:
		stopErr = fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: draining sessions", "deadline", cfg.ShutdownTimeout, "sessions", gw.sessions.Active())
	gw.edge.SetDraining()
	dctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	gw.sessions.Drain(dctx)
	l.shutdown(dctx, log)
	log.Info("gateway stopped")
	return stopErr
}

// listeners are the gateway's two HTTP servers: the public one (the web
// client, /v1/ws, /healthz, /readyz; connections capped at accept) and the
// admin one (/metrics, /metrics/summary, /healthz, /readyz).
type listeners struct {
	public, admin         *http.Server
	publicAddr, adminAddr net.Addr
	scheme                string     // https with TURNSTILE_TLS_CERT_FILE, else http
	errs                  chan error // a server that stopped on its own
	stopped               chan struct{}
}

// listen opens both listeners and serves them in the background, over TLS
// when the configuration has a certificate.
func listen(cfg Config, gw *gateway, log *slog.Logger) (*listeners, error) {
	wrap, scheme := func(ln net.Listener) net.Listener { return ln }, "http"
	if cfg.TLSCertFile != "" {
		certs, err := server.LoadCertFiles(cfg.TLSCertFile, cfg.TLSKeyFile, log)
		if err != nil {
			return nil, fmt.Errorf("TURNSTILE_TLS_CERT_FILE, TURNSTILE_TLS_KEY_FILE: %w", err)
		}
		tlsCfg := certs.TLSConfig()
		wrap, scheme = func(ln net.Listener) net.Listener { return tls.NewListener(ln, tlsCfg) }, "https"
		log.Info("TLS on both listeners, the certificate read again when its files change", certs.Loaded()...)
	}
	pub, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on TURNSTILE_ADDR=%s: %w", cfg.Addr, err)
	}
	adm, err := net.Listen("tcp", cfg.AdminAddr)
	if err != nil {
		_ = pub.Close()
		return nil, fmt.Errorf("listen on TURNSTILE_ADMIN_ADDR=%s: %w", cfg.AdminAddr, err)
	}
	l := &listeners{public: gw.edge.PublicServer(), admin: gw.edge.AdminServer(), publicAddr: pub.Addr(),
		adminAddr: adm.Addr(), scheme: scheme, errs: make(chan error, 2), stopped: make(chan struct{})}
	done := make(chan struct{}, 2)
	// The connection cap counts TCP connections, handshakes included.
	for srv, ln := range map[*http.Server]net.Listener{l.public: wrap(gw.edge.LimitListener(pub)), l.admin: wrap(adm)} {
		go func() {
			defer func() { done <- struct{}{} }()
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				l.errs <- err
			}
		}()
	}
	go func() {
		<-done
		<-done
		close(l.stopped)
	}()
	log.Debug("listening", "public", pub.Addr().String(), "admin", adm.Addr().String())
	return l, nil
}

// shutdown stops the public server, then the admin one (metrics stay
// readable while the sessions drain), within ctx.
func (l *listeners) shutdown(ctx context.Context, log *slog.Logger) {
	for _, srv := range []*http.Server{l.public, l.admin} {
		if err := srv.Shutdown(ctx); err != nil {
			log.Warn("http shutdown did not finish in time", "err", err)
			_ = srv.Close()
		}
	}
	<-l.stopped
}

// redisLogger adapts slog to go-redis's internal logger.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.Debug("redis client: " + fmt.Sprintf(format, v...))
}
