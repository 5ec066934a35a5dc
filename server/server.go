// Package server is the gateway's HTTP edge: the routes (/v1/ws, /healthz,
// /readyz, /metrics, the web client), and authentication and Origin checks
// before a WebSocket is accepted.
package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/session"
)

// Pinger reports whether the session store answers.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Config is the edge's part of the gateway configuration.
type Config struct {
	// AllowedOrigins are Origin host patterns (path.Match syntax, e.g.
	// "app.example.com", "*.example.com"). Empty: same host only.
	AllowedOrigins []string
	// ReadyTimeout bounds the store ping of /readyz; default 1 s.
	ReadyTimeout time.Duration
}

// Deps are the parts the edge hands work to.
type Deps struct {
	Sessions *session.Manager
	Auth     *Authenticator
	Store    Pinger
	Gatherer prometheus.Gatherer
	Summary  *metrics.Summary // for /metrics/summary; nil: not served
	Web      http.Handler
	Log      *slog.Logger
}

// Server routes HTTP requests.
type Server struct {
	cfg      Config
	d        Deps
	draining atomic.Bool
	mux      *http.ServeMux
}

// New builds the routes.
func New(cfg Config, d Deps) *Server {
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = time.Second
	}
	s := &Server{cfg: cfg, d: d, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(d.Gatherer, promhttp.HandlerOpts{}))
	if d.Summary != nil {
		s.mux.Handle("GET /metrics/summary", SummaryHandler(d.Summary))
	}
	s.mux.HandleFunc("GET /v1/ws", s.ws)
	if d.Web != nil {
		s.mux.Handle("GET /", d.Web)
	}
	return s
}

// Handler is the root handler.
func (s *Server) Handler() http.Handler { return s.mux }

// SetDraining makes /readyz fail so that load balancers stop sending new
// connections while the sessions drain.
func (s *Server) SetDraining() { s.draining.Store(true) }

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": "draining"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.ReadyTimeout)
	defer cancel()
	if err := s.d.Store.Ping(ctx); err != nil {
		s.d.Log.Warn("not ready: session store unreachable", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": "redis unreachable"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ready": true})
}

func (s *Server) ws(w http.ResponseWriter, r *http.Request) {
	id, err := s.d.Auth.identify(r)
	if err != nil {
		msg := "a valid token is required"
		if errors.Is(err, ErrNoToken) {
			msg = "no token: send Authorization: Bearer <token> or ?access_token=<token>"
		}
		s.d.Log.Info("websocket refused: unauthenticated", "err", err, "remote", r.RemoteAddr)
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": msg})
		return
	}
	hw := &hijackWatch{ResponseWriter: w}
	conn, err := websocket.Accept(hw, r, &websocket.AcceptOptions{
		Subprotocols:   []string{protocol.Subprotocol},
		OriginPatterns: s.cfg.AllowedOrigins,
	})
	if err != nil {
		// Accept has already answered (403 for a bad Origin, 400 otherwise).
		s.d.Log.Info("websocket refused", "err", err, "remote", r.RemoteAddr)
		return
	}
	s.d.Sessions.Serve(context.WithoutCancel(r.Context()), conn, hw.conn, id)
}

// hijackWatch keeps the raw connection the WebSocket library takes over,
// so that the session can drop it at once: the library cannot abandon a
// close handshake stuck behind a full socket buffer by itself.
type hijackWatch struct {
	http.ResponseWriter
	conn net.Conn
}

func (h *hijackWatch) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := h.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("http.ResponseWriter does not implement http.Hijacker")
	}
	c, brw, err := hj.Hijack()
	h.conn = c
	return c, brw, err
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
