package server

import (
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/turnstile-gw/turnstile/metrics"
)

// Defaults of the HTTP limits.
const (
	// DefaultReadHeaderTimeout cuts a connection whose request headers have
	// not arrived in full (a stalled client holding a socket and a buffer).
	DefaultReadHeaderTimeout = 5 * time.Second
	// DefaultIdleTimeout cuts a keep-alive connection with no request.
	DefaultIdleTimeout = 60 * time.Second
	// DefaultMaxHeaderBytes bounds request headers (Go's default is 1 MB);
	// the largest legitimate ones carry a 4 KiB token.
	DefaultMaxHeaderBytes = 16 << 10
)

// PublicServer is the http.Server of the public listener (the web client,
// /v1/ws, /healthz, /readyz) with the configured header, idle and
// header-size limits, and the limits of unauthenticated connections
// (unauth.go). Serve it on LimitListener's wrapping of the listener.
func (s *Server) PublicServer() *http.Server {
	srv := s.httpServer(s.conns.perClient(s.Handler()))
	srv.ConnState = s.conns.connState
	srv.ConnContext = s.conns.connContext
	return srv
}

// AdminServer is the http.Server of the admin listener (/metrics,
// /metrics/summary, /healthz, /readyz), with the same limits and no
// connection cap.
func (s *Server) AdminServer() *http.Server { return s.httpServer(s.AdminHandler()) }

func (s *Server) httpServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: s.cfg.HTTPReadHeaderTimeout,
		IdleTimeout:       s.cfg.HTTPIdleTimeout,
		MaxHeaderBytes:    s.cfg.HTTPMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.d.Log.Handler(), slog.LevelWarn),
	}
}

// LimitListener caps the connections open at once on ln at
// Config.MaxConnections, and the unauthenticated ones among them per
// client and together (unauth.go). A connection beyond the cap is closed
// as soon as it is accepted, not queued, and counted as a max_connections
// refusal: what stays open keeps being served, /healthz and /readyz
// included. Serve PublicServer on it.
func (s *Server) LimitListener(ln net.Listener) net.Listener {
	return &tableListener{Listener: ln, t: s.conns}
}

// full is the limit a new user would be refused by on this node ("": none
// is full): the node's sessions, or its connections.
func (s *Server) full() metrics.RefusalReason {
	switch {
	case s.admit.full():
		return metrics.RefusedMaxSessions
	case s.conns.full():
		return metrics.RefusedMaxConnections
	}
	return ""
}
