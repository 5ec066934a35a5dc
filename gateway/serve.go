package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"

	"cloud.google.com/go/auth"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/fake/fakeopenai"
	"github.com/turnstile-gw/turnstile/internal/wsbuf"
	"github.com/turnstile-gw/turnstile/server"
	"github.com/turnstile-gw/turnstile/tools"
)

// Gateway is an assembled gateway: New wires it from a Config, Serve
// serves it until its context ends and then drains it.
type Gateway struct {
	cfg   Config
	log   *slog.Logger
	reg   *prometheus.Registry
	parts *gateway
	l     *listeners // nil until Listen

	reload    <-chan os.Signal
	closeOnce sync.Once
}

// Options are what a program embedding the gateway may add to its Config.
// The zero value is what the gateway binary runs with.
type Options struct {
	// Log receives the gateway's log; nil: slog.Default().
	Log *slog.Logger
	// Registry receives the gateway's metrics, which the admin listener
	// serves on /metrics; nil: a registry of the gateway's own.
	Registry *prometheus.Registry
	// Reload: each value received reloads TURNSTILE_TOOLS_DIR, as at start
	// (the binary sends SIGHUP); nil: no reloads.
	Reload <-chan os.Signal

	// The offline model's brains (only used when the model is the
	// in-process fake: no GEMINI_API_KEY, no OPENAI_API_KEY): what the fake
	// model says and which tools it calls. nil: the demo brains.
	TextBrain   fakegemini.Brain
	LiveBrain   fakegemini.LiveBrain
	OpenAIBrain fakeopenai.Brain // the text model's with TURNSTILE_TEXT_PROVIDER=openai
	// Tools are added to the tool registry beside the built-in, HTTP and
	// MCP tools, governed by the same pipeline.
	Tools []*tools.Tool
	// Credentials, when set, replace application default credentials for
	// Vertex AI.
	Credentials *auth.Credentials
}

// New assembles the gateway from cfg (LoadConfig reads one from flags and
// the environment): the store, the tool registry, the model clients, the
// sessions and both HTTP servers. It does not listen yet. ctx bounds the
// start (Redis checks, MCP servers); on error whatever was started is
// closed.
func New(ctx context.Context, cfg Config, opts Options) (*Gateway, error) {
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	v, c := buildVersion()
	log.Info("starting turnstile gateway", "version", v, "commit", c, "config", cfg)
	parts, err := assemble(ctx, cfg, reg, log, opts)
	if err != nil {
		return nil, err
	}
	return &Gateway{cfg: cfg, log: log, reg: reg, parts: parts, reload: opts.Reload}, nil
}

// Listen opens the public and the admin listener (TURNSTILE_ADDR and
// TURNSTILE_ADMIN_ADDR; port 0 picks a free one) and serves them in the
// background. Serve calls it when it has not been called.
func (g *Gateway) Listen() error {
	if g.l != nil {
		return nil
	}
	l, err := listen(g.cfg, g.parts, g.log)
	if err != nil {
		return err
	}
	g.l = l
	g.log.Info("gateway listening", "url", g.URL()+"/", "admin_url", g.AdminURL()+"/",
		"dev_mode", g.cfg.DevMode(), "offline_demo_model", g.cfg.Offline(), "max_connections", g.cfg.MaxConnections,
		"max_sessions", g.cfg.MaxSessions, "max_sessions_per_user", g.cfg.MaxSessionsPerUser)
	return nil
}

// URL is the public listener's base URL (http or https, no trailing
// slash): the web client, /v1/ws. "" before Listen.
func (g *Gateway) URL() string {
	if g.l == nil {
		return ""
	}
	return g.l.scheme + "://" + g.l.publicAddr.String()
}

// AdminURL is the admin listener's base URL: /metrics, /metrics/summary,
// /healthz, /readyz. "" before Listen.
func (g *Gateway) AdminURL() string {
	if g.l == nil {
		return ""
	}
	return g.l.scheme + "://" + g.l.adminAddr.String()
}

// Serve serves the gateway until ctx ends (or a listener fails), then
// drains: new connections are refused, live sessions are told to
// reconnect elsewhere within TURNSTILE_SHUTDOWN_TIMEOUT, and everything is
// closed. It returns the listener's error, if one stopped it.
func (g *Gateway) Serve(ctx context.Context) error {
	defer g.Close()
	if g.cfg.PprofAddr != "" {
		stop, err := startPprof(g.cfg.PprofAddr, g.log)
		if err != nil {
			return err
		}
		defer stop()
	}
	if err := g.Listen(); err != nil {
		return err
	}
	rctx, stopReloads := context.WithCancel(ctx)
	reloads := make(chan struct{})
	go func() { defer close(reloads); watchReloads(rctx, g.parts.toolsReload, g.reload, g.log) }()
	defer func() { stopReloads(); <-reloads }()

	var stopErr error
	select {
	case err := <-g.l.errs:
		stopErr = fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	g.log.Info("shutting down: draining sessions", "deadline", g.cfg.ShutdownTimeout, "sessions", g.parts.sessions.Active())
	dctx, cancel := context.WithTimeout(context.Background(), g.cfg.ShutdownTimeout)
	defer cancel()
	g.Shutdown(dctx)
	g.log.Info("gateway stopped")
	return stopErr
}

// Shutdown drains the sessions (/readyz says draining from its first
// moment), stops both listeners (the admin one last: metrics stay readable
// while sessions drain) and closes the gateway, within ctx.
func (g *Gateway) Shutdown(ctx context.Context) {
	g.parts.edge.SetDraining()
	g.parts.sessions.Drain(ctx)
	if g.l != nil {
		g.l.shutdown(ctx, g.log)
	}
	g.Close()
}

// Close releases what New started (store, model clients, tool servers)
// without draining; it is safe to call more than once.
func (g *Gateway) Close() {
	g.closeOnce.Do(g.parts.close)
}

// serve runs the gateway until ctx ends, then drains within the shutdown
// timeout.
func serve(ctx context.Context, cfg Config, log *slog.Logger, reload <-chan os.Signal) error {
	gw, err := New(ctx, cfg, Options{Log: log, Reload: reload})
	if err != nil {
		return err
	}
	return gw.Serve(ctx)
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
	pubWrap, admWrap, scheme := func(ln net.Listener) net.Listener { return ln }, func(ln net.Listener) net.Listener { return ln }, "http"
	if cfg.TLSCertFile != "" {
		certs, err := server.LoadCertFiles(cfg.TLSCertFile, cfg.TLSKeyFile, log)
		if err != nil {
			return nil, fmt.Errorf("TURNSTILE_TLS_CERT_FILE, TURNSTILE_TLS_KEY_FILE: %w", err)
		}
		tlsCfg := certs.TLSConfig()
		// The public listener's TLS is over wsbuf's feed, so that a browser's
		// socket can join an event loop with its TLS (TURNSTILE_VOICE_LOOP);
		// the admin listener has no WebSockets.
		pubWrap = func(ln net.Listener) net.Listener { return wsbuf.TLSListener(ln, tlsCfg) }
		admWrap, scheme = func(ln net.Listener) net.Listener { return tls.NewListener(ln, tlsCfg) }, "https"
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
	for srv, ln := range map[*http.Server]net.Listener{l.public: pubWrap(gw.edge.LimitListener(pub)), l.admin: admWrap(adm)} {
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
