package fakegemini

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

// shutdownGrace bounds how long Close waits for connections to drain after
// it has told every in-flight stream to end.
const shutdownGrace = 5 * time.Second

// Server is a fake Gemini API endpoint. Its routes are registered on one mux
// so that further protocol handlers (the Live WebSocket) can join them.
type Server struct {
	brain Brain
	log   *slog.Logger
	mux   *http.ServeMux

	ctx    context.Context // ends every in-flight request on Close
	cancel context.CancelFunc

	mu       sync.Mutex
	closed   bool
	srv      *http.Server
	served   chan struct{} // closed when the Serve goroutine returns
	handlers sync.WaitGroup
	inFlight atomic.Int64
	live     liveHub
	strict   strictState
}

// New returns a server whose model answers come from brain. A nil log
// discards logs.
func New(brain Brain, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{brain: brain, log: log, mux: http.NewServeMux(), ctx: ctx, cancel: cancel}
	s.mux.HandleFunc("POST /{version}/models/{rest}", s.handleModels)
	s.mux.HandleFunc("POST /{version}/projects/{project}/locations/{location}/publishers/{publisher}/models/{rest}", s.handleVertexModels)
	s.mux.HandleFunc("GET /ws/{rpc}", s.handleLive)
	s.mux.HandleFunc("GET /ws/{service}/{method}", s.handleVertexLive)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("%s %s is not served by the fake Gemini API", r.Method, r.URL.Path))
	})
	return s
}

// Handler serves the fake API. Every request is tracked so that Close can
// end it and wait for it; requests arriving after Close get 503.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "the fake Gemini server is shutting down")
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
		r = r.WithContext(ctx)
		if p := cleanSlashes(r.URL.Path); p != r.URL.Path {
			u := *r.URL
			u.Path, u.RawPath = p, ""
			r.URL = &u
		}
		s.mux.ServeHTTP(w, r)
	})
}

// InFlight reports how many requests are being served right now, e.g. so a
// test can check that a cancelled client really released its stream.
func (s *Server) InFlight() int {
	return int(s.inFlight.Load())
}

// Start listens on addr (e.g. "127.0.0.1:0") and serves in a goroutine. It
// returns the base URL to give the genai client, e.g.
// "http://127.0.0.1:41234/".
func (s *Server) Start(addr string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", errors.New("fakegemini: start: server closed")
	}
	if s.srv != nil {
		return "", errors.New("fakegemini: start: already started")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("fakegemini: listen %s: %w", addr, err)
	}
	s.srv = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
	}
	s.served = make(chan struct{})
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("fake gemini: serve", "err", err)
		}
	}()
	return baseURL(ln.Addr()), nil
}

// Close stops serving: in-flight streams (hanging ones included) end, idle
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
			err = errors.Join(fmt.Errorf("fakegemini: shutdown: %w", err), srv.Close())
		}
		cancel()
		<-served
	}
	s.handlers.Wait()
	return err
}

// baseURL turns a listen address into the URL a client uses; a wildcard
// listen address is reached through loopback.
func baseURL(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return "http://" + addr.String() + "/"
	}
	host := tcp.IP.String()
	if tcp.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, fmt.Sprint(tcp.Port)) + "/"
}
