package server

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
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
// header-size limits. Serve it on LimitListener's wrapping of the listener.
func (s *Server) PublicServer() *http.Server { return s.httpServer(s.Handler()) }

// AdminServer is the http.Server of the admin listener (/metrics,
// /metrics/summary, /healthz, /readyz), with the same limits and no
// connection cap.
func (s *Server) AdminServer() *http.Server { return s.httpServer(s.AdminHandler()) }

func (s *Server) httpServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    s.cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.d.Log.Handler(), slog.LevelWarn),
	}
}

// LimitListener caps the connections open at once on ln at
// Config.MaxConnections (0: ln as is). A connection beyond the cap is
// closed as soon as it is accepted, not queued, and counted as a
// max_connections refusal: what stays open keeps being served, /healthz
// and /readyz included.
func (s *Server) LimitListener(ln net.Listener) net.Listener {
	if s.cfg.MaxConnections <= 0 {
		return ln
	}
	return &capListener{Listener: ln, max: int64(s.cfg.MaxConnections), refused: func(c net.Conn) {
		// At accept there are no headers yet: the client is the TCP peer.
		s.refused(metrics.RefusedMaxConnections, metrics.ChannelNone, c.RemoteAddr().String(), nil)
	}}
}

type capListener struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused func(net.Conn)
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			// Counted before the reset, so that whoever sees the reset
			// also sees the refusal in the metrics.
			l.refused(c)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // reset: nothing of it stays in TIME_WAIT here
			}
			_ = c.Close()
			continue
		}
		return &countedConn{Conn: c, l: l}, nil
	}
}

// countedConn gives its place back when closed, however often Close is
// called (the HTTP server and a hijacking WebSocket may both close it).
type countedConn struct {
	net.Conn
	l    *capListener
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
