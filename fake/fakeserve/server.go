package fakeserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// shutdownGrace bounds how long Close waits for connections to drain
	// after it has told every in-flight request to end.
	shutdownGrace = 5 * time.Second
	// readHeaderTimeout bounds how long a client may take to send its
	// request headers.
	readHeaderTimeout = 10 * time.Second
)

// Server runs a fake's routes over HTTP. Every request is tracked so that
// Close can end it (hanging streams and WebSockets included) and wait for
// it; requests arriving after Close are refused.
type Server struct {
	name   string // e.g. "fakegemini": prefixes errors and log messages
	routes http.Handler
	refuse http.HandlerFunc
	log    *slog.Logger

	ctx    context.Context // ends every in-flight request on Close
	cancel context.CancelFunc

	mu       sync.Mutex
	closed   bool
	srv      *http.Server
	served   chan struct{} // closed when the Serve goroutine returns
	handlers sync.WaitGroup
	inFlight atomic.Int64
}

// New returns a server for routes. name prefixes its errors and log
// messages; refuse answers requests that arrive after Close (in the fake's
// own error format); a nil log discards logs.
func New(name string, routes http.Handler, refuse http.HandlerFunc, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{name: name, routes: routes, refuse: refuse, log: log, ctx: ctx, cancel: cancel}
}

// Handler serves the routes, tracked: each request's context also ends on
// Close, and Close waits for it to return.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			s.refuse(w, r)
			return
		}
		s.handlers.Add(1)
		s.mu.Unlock()
		s.inFlight.Add(1)
		defer func() {
			s.inFlight.Add(-1)
			s.handlers.Done()
		}()

		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		stop := context.AfterFunc(s.ctx, cancel)
		defer stop()
		s.routes.ServeHTTP(w, r.WithContext(ctx))
	})
}

// InFlight reports how many requests are being served right now, e.g. so a
// test can check that a cancelled client really released its stream.
func (s *Server) InFlight() int {
	return int(s.inFlight.Load())
}

// Start listens on addr (e.g. "127.0.0.1:0") and serves in a goroutine. It
// returns the root URL to reach it, without a trailing slash, e.g.
// "http://127.0.0.1:41234"; a wildcard listen address is reached through
// loopback.
func (s *Server) Start(addr string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", fmt.Errorf("%s: start: server closed", s.name)
	}
	if s.srv != nil {
		return "", fmt.Errorf("%s: start: already started", s.name)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("%s: listen %s: %w", s.name, addr, err)
	}
	s.srv = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: readHeaderTimeout,
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
	}
	s.served = make(chan struct{})
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error(s.name+": serve", "err", err)
		}
	}()
	return rootURL(ln.Addr()), nil
}

// Close stops serving: in-flight requests (hanging ones included) end, idle
// connections close, and Close returns once every goroutine it started and
// every handler has returned. It is safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	srv, served := s.srv, s.served
	s.mu.Unlock()

	s.cancel()
	var err error
	if srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		if err = srv.Shutdown(ctx); err != nil {
			err = errors.Join(fmt.Errorf("%s: shutdown: %w", s.name, err), srv.Close())
		}
		cancel()
		<-served
	}
	s.handlers.Wait()
	return err
}

// rootURL turns a listen address into the URL a client uses; a wildcard
// listen address is reached through loopback.
func rootURL(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return "http://" + addr.String()
	}
	host := tcp.IP.String()
	if tcp.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, fmt.Sprint(tcp.Port))
}
