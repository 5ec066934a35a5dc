package fakeopenai

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

// Options configure a Server. The zero value serves without authentication,
// like a local model server (Ollama, vLLM).
type Options struct {
	// APIKey, when set, must arrive as "Authorization: Bearer APIKEY";
	// requests without it, or with another key, get the real API's 401.
	APIKey string
	// Log receives the server's logs; nil discards them.
	Log *slog.Logger
}

// Server is a fake OpenAI-compatible endpoint.
type Server struct {
	brain Brain
	opts  Options
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
}

// New returns a server whose model answers come from brain.
func New(brain Brain, opts Options) *Server {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{brain: brain, opts: opts, log: log, mux: http.NewServeMux(), ctx: ctx, cancel: cancel}
	s.mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, APIError{Type: "invalid_request_error",
			Message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path)})
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
			writeError(w, http.StatusServiceUnavailable, APIError{Type: "server_error",
				Message: "The fake OpenAI server is shutting down."})
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
		s.mux.ServeHTTP(w, r.WithContext(ctx))
	})
}

// InFlight reports how many requests are being served right now, e.g. so a
// test can check that a cancelled client really released its stream.
func (s *Server) InFlight() int {
	return int(s.inFlight.Load())
}

// Start listens on addr (e.g. "127.0.0.1:0") and serves in a goroutine. It
// returns the base URL to give a client, /v1 included, e.g.
// "http://127.0.0.1:41234/v1".
func (s *Server) Start(addr string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", errors.New("fakeopenai: start: server closed")
	}
	if s.srv != nil {
		return "", errors.New("fakeopenai: start: already started")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("fakeopenai: listen %s: %w", addr, err)
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
			s.log.Error("fake openai: serve", "err", err)
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
			err = errors.Join(fmt.Errorf("fakeopenai: shutdown: %w", err), srv.Close())
		}
		cancel()
		<-served
	}
	s.handlers.Wait()
	return err
}

// baseURL turns a listen address into the base URL a client uses; a
// wildcard listen address is reached through loopback.
func baseURL(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return "http://" + addr.String() + "/v1"
	}
	host := tcp.IP.String()
	if tcp.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, fmt.Sprint(tcp.Port)) + "/v1"
}
