// Package server is the gateway's HTTP edge: the public routes (/v1/ws, the
// web client, /healthz, /readyz) and the admin ones (/metrics,
// /metrics/summary, /healthz, /readyz, the session timelines and operator
// actions under /admin/, behind the admin token); the HTTP limits and the connection
// cap; and, before a WebSocket is accepted, the Origin check,
// authentication and admission (sessions per node, connections per user).
package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/fdroom"
	"github.com/turnstile-gw/turnstile/internal/throttle"
	"github.com/turnstile-gw/turnstile/internal/wsbuf"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/session"
)

// Pinger reports whether the session store answers.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Config is the edge's part of the gateway configuration. Zero values take
// the defaults noted; a zero limit is no limit.
type Config struct {
	// Access are the browser Origins allowed to open a WebSocket and the
	// admin routes' token (settings_listen.go).
	Access
	// ReadyTimeout bounds the store ping of /readyz; default 1 s.
	ReadyTimeout time.Duration

	// Edge are the listener's limits: HTTP timeouts, connection and
	// session caps, proxies, unauthenticated connections (settings.go).
	Edge
}

// Deps are the parts the edge hands work to.
type Deps struct {
	Sessions *session.Manager
	Auth     *Authenticator
	Store    Pinger
	Leases   Leases // for MaxSessionsPerUser; nil: no per-user limit
	Metrics  *metrics.Metrics
	Gatherer prometheus.Gatherer
	Summary  *metrics.Summary // for /metrics/summary; nil: not served
	Web      http.Handler
	Log      *slog.Logger
	// Ready records every readiness result (turnstile_ready: metrics'
	// SetReady); nil: not recorded.
	Ready func(ready bool)
	// Warnings are what /readyz says besides ready or not: conditions
	// found at startup that do not stop the node serving but that an
	// operator must fix (a Redis without persistence).
	Warnings []string
	// Telephony puts a phone carrier's routes on the public listener;
	// nil: no phone calls.
	Telephony *Telephony
	// Admin serves the /admin/ routes (timelines, live sessions, operator
	// actions); nil: not served.
	Admin AdminStore

	// Cooldowns refuses the upgrades of a user closed 4008 for rate abuse
	// until its cooldown ends; nil: none.
	Cooldowns Cooldowns

	// Files are the file descriptors the public listener's connections
	// share with the voice sessions' model connections: each connection
	// holds one from accept to close, and one is refused at accept
	// (max_connections) when none is left or the connections hold
	// MaxConnections of them; it must be made with that bound
	// (Room.WithConns(MaxConnections)). nil: a room of MaxConnections.
	Files *fdroom.Room
}

// Server routes HTTP requests.
type Server struct {
	cfg      Config
	d        Deps
	draining atomic.Bool
	public   *http.ServeMux
	admin    *http.ServeMux
	throttle *throttle.Keyed
	admit    *admission
	conns    *connTable     // the public listener's connections
	calls    streamingCalls // phone calls streaming on this node
}

// New builds the routes. When per-user leases are on it starts renewing
// them; Close stops that.
func New(cfg Config, d Deps) *Server {
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = time.Second
	}
	if cfg.HTTPReadHeaderTimeout <= 0 {
		cfg.HTTPReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if cfg.HTTPIdleTimeout <= 0 {
		cfg.HTTPIdleTimeout = DefaultIdleTimeout
	}
	if cfg.HTTPMaxHeaderBytes <= 0 {
		cfg.HTTPMaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if cfg.UnauthIdleTimeout <= 0 {
		cfg.UnauthIdleTimeout = DefaultUnauthIdleTimeout
	}
	s := &Server{cfg: cfg, d: d, public: http.NewServeMux(), admin: http.NewServeMux(),
		throttle: &throttle.Keyed{Every: logEvery}}
	s.admit = newAdmission(cfg, d, s.throttle)
	s.conns = newConnTable(cfg, d.Files, d.Auth.DevMode(), func(reason metrics.RefusalReason, client string) {
		s.refused(reason, metrics.ChannelNone, client, nil)
	})
	for _, mux := range []*http.ServeMux{s.public, s.admin} {
		mux.HandleFunc("GET /healthz", s.healthz)
		mux.HandleFunc("GET /readyz", s.readyz)
	}
	s.admin.Handle("GET /metrics", promhttp.HandlerFor(d.Gatherer, promhttp.HandlerOpts{}))
	if d.Summary != nil {
		s.admin.Handle("GET /metrics/summary", SummaryHandler(d.Summary))
	}
	if d.Admin != nil {
		s.adminRoutes()
	}
	s.public.HandleFunc("GET /v1/ws", s.ws)
	if d.Telephony != nil {
		s.routeTelephony(d.Telephony)
	}
	if d.Web != nil {
		s.public.Handle("GET /", d.Web)
	}
	return s
}

// Metrics are the collectors the edge counts its refusals on.
func (s *Server) Metrics() *metrics.Metrics { return s.d.Metrics }

// Close stops renewing per-user leases. Call it after the sessions ended.
func (s *Server) Close() { s.admit.close() }

// Handler is the public listener's handler.
func (s *Server) Handler() http.Handler { return s.public }

// AdminHandler is the admin listener's handler: with an admin token, every
// route but the probes (and /metrics when left open) requires it.
func (s *Server) AdminHandler() http.Handler {
	return adminGuard(string(s.cfg.AdminToken), s.cfg.AdminMetricsOpen, s.admin)
}

// SetDraining makes /readyz fail so that load balancers stop sending new
// connections while the sessions drain.
func (s *Server) SetDraining() {
	s.draining.Store(true)
	s.setReady(false)
}

func (s *Server) setReady(ready bool) {
	if s.d.Ready != nil {
		s.d.Ready(ready)
	}
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		s.setReady(false)
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": "draining"})
		return
	}
	// Full: a new user would be refused here; the load balancer should
	// send them to another node. limit is the refusal reason they would get.
	if limit := s.full(); limit != "" {
		s.setReady(false)
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": "full", "limit": limit})
		return
	}
	if err := s.d.Auth.Ready(); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": "jwks not fetched"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.ReadyTimeout)
	defer cancel()
	if err := s.d.Store.Ping(ctx); err != nil {
		s.setReady(false)
		// Throttled: /readyz is unauthenticated, and each request during an outage would log.
		if count, ok := s.throttle.Note("readyz_store", clock.Wall.Now(), 1); ok {
			s.d.Log.Warn("not ready: session store unreachable", "err", err, "failures", count)
		}
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": "redis unreachable"})
		return
	}
	s.setReady(true)
	body := map[string]any{"ready": true}
	if len(s.d.Warnings) > 0 {
		body["warnings"] = s.d.Warnings
	}
	// Degraded, not unready: the keys fetched before still verify tokens, and taking every
	// node out of the load balancer for an identity provider's bad answer would refuse everyone.
	if reason := s.d.Auth.Degraded(); reason != "" {
		body["degraded"] = map[string]string{"jwks": reason}
	}
	writeJSON(w, http.StatusOK, body)
}

// ws checks a WebSocket request in order of cost — Origin and Host, token,
// the node's session count, the user's abuse cooldown and connections
// across nodes — and answers each refusal over plain HTTP before the
// upgrade.
func (s *Server) ws(w http.ResponseWriter, r *http.Request) {
	client := s.cfg.TrustedProxies.ClientIP(r)
	if err := s.checkOrigin(r); err != nil {
		s.refused(metrics.RefusedOrigin, metrics.ChannelBrowser, client, err)
		writeJSON(w, http.StatusForbidden, map[string]any{"error": "this page's origin may not connect"})
		return
	}
	id, err := s.d.Auth.Authenticate(r)
	if err != nil {
		msg := "a valid token is required"
		if errors.Is(err, ErrNoToken) {
			msg = "no token: send Authorization: Bearer <token>, or the subprotocols turnstile.v1 and turnstile.auth.<token>"
		}
		s.refused(metrics.RefusedUnauthenticated, metrics.ChannelBrowser, client, err)
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": msg})
		return
	}
	leaveNode, ok := s.admit.admitSession()
	if !ok {
		s.refused(metrics.RefusedMaxSessions, metrics.ChannelBrowser, client, nil)
		w.Header().Set("Retry-After", retryAfter(retryAfterNodeFull))
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "this node is at its session limit; try again later",
			"reason": metrics.RefusedMaxSessions})
		return
	}
	// release gives the admission back: when this handler returns early,
	// or, once the session runs, when it ends.
	release := leaveNode
	defer func() {
		if release != nil {
			release()
		}
	}()
	if wait := s.cooldown(r.Context(), id.User); wait > 0 {
		s.refused(metrics.RefusedAbuseCooldown, metrics.ChannelBrowser, client, nil)
		secs := protocol.RetryAfterSeconds(wait)
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		writeJSON(w, http.StatusTooManyRequests, map[string]any{
			"error":  "this user was closed for rate abuse (4008) and may not connect nor resume until the cooldown ends",
			"reason": metrics.RefusedAbuseCooldown, "retryAfter": secs})
		return
	}
	leaveUser, ok := s.admit.admitUser(r.Context(), id.User)
	if !ok {
		s.refused(metrics.RefusedMaxSessionsPerUser, metrics.ChannelBrowser, client, nil)
		w.Header().Set("Retry-After", retryAfter(retryAfterUserFull))
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": "too many open connections for this user; close one",
			"reason": metrics.RefusedMaxSessionsPerUser})
		return
	}
	release = func() { leaveUser(); leaveNode() }
	// The connection holds its buffers only while a frame is in flight
	// (wsbuf.ServerConn). checkOrigin has decided on Origin; no compression.
	conn, err := wsbuf.Accept(w, r, wsbuf.AcceptOptions{Subprotocols: []string{protocol.Subprotocol}})
	if err != nil {
		// Accept has already answered (426 or 400 for a request that is no upgrade).
		s.d.Log.Info("websocket refused", "err", err, "client_ip", client)
		return
	}
	id.ClientIP = client
	// The session runs on a goroutine of its own, and this one (the HTTP
	// server's, with the request and its buffers) returns. Its context is
	// not the request's: the session reads no value from it, and holding
	// it would keep the request's contexts (about 0.3 KiB) for as long as
	// the session stays open.
	ended := release
	release = nil
	s.d.Sessions.Start(context.Background(), conn, id, ended)
}

// refused counts a refusal and logs it, at most once per reason per
// logEvery on this node, with how many there were since the last line and
// the client of the one logged. A
// refused upgrade is also a browser that got no session.
func (s *Server) refused(reason metrics.RefusalReason, ch metrics.Channel, client string, err error) {
	s.d.Metrics.Refusal(reason, ch)
	if !metrics.IsConnectionRefusal(reason) {
		s.d.Metrics.RefuseSession(string(reason), ch)
	}
	count, ok := s.throttle.Note(string(reason), clock.Wall.Now(), 1)
	if !ok {
		return
	}
	attrs := []any{"reason", reason, "count", count, "client_ip", client}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	level := slog.LevelWarn
	if reason == metrics.RefusedUnauthenticated || reason == metrics.RefusedOrigin {
		level = slog.LevelInfo
	}
	s.d.Log.Log(context.Background(), level, "connection refused", attrs...)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
