package fakegemini

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/turnstile-gw/turnstile/fake/fakeserve"
)

// Server is a fake Gemini API endpoint. Its routes are registered on one mux
// so that further protocol handlers (the Live WebSocket) can join them.
type Server struct {
	brain Brain
	log   *slog.Logger
	mux   *http.ServeMux
	srv   *fakeserve.Server // the lifecycle: start, track, close

	live   liveHub
	strict strictState
}

// New returns a server whose model answers come from brain. A nil log
// discards logs.
func New(brain Brain, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{brain: brain, log: log, mux: http.NewServeMux()}
	s.mux.HandleFunc("POST /{version}/models/{rest}", s.handleModels)
	s.mux.HandleFunc("POST /{version}/projects/{project}/locations/{location}/publishers/{publisher}/models/{rest}", s.handleVertexModels)
	s.mux.HandleFunc("GET /ws/{rpc}", s.handleLive)
	s.mux.HandleFunc("GET /ws/{service}/{method}", s.handleVertexLive)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("%s %s is not served by the fake Gemini API", r.Method, r.URL.Path))
	})
	s.srv = fakeserve.New("fakegemini", http.HandlerFunc(s.route), func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "the fake Gemini server is shutting down")
	}, log)
	return s
}

// route serves one request on the mux, its path's runs of slashes collapsed
// first (see cleanSlashes).
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	if p := cleanSlashes(r.URL.Path); p != r.URL.Path {
		u := *r.URL
		u.Path, u.RawPath = p, ""
		r.URL = &u
	}
	s.mux.ServeHTTP(w, r)
}

// Handler serves the fake API. Every request is tracked so that Close can
// end it and wait for it; requests arriving after Close get 503.
func (s *Server) Handler() http.Handler { return s.srv.Handler() }

// InFlight reports how many requests are being served right now, e.g. so a
// test can check that a cancelled client really released its stream.
func (s *Server) InFlight() int { return s.srv.InFlight() }

// Start listens on addr (e.g. "127.0.0.1:0") and serves in a goroutine. It
// returns the base URL to give the genai client, e.g.
// "http://127.0.0.1:41234/".
func (s *Server) Start(addr string) (string, error) {
	root, err := s.srv.Start(addr)
	if err != nil {
		return "", err
	}
	return root + "/", nil
}

// Close stops serving: in-flight streams and Live sessions (hanging ones
// included) end, idle connections close, and Close returns once every
// goroutine it started and every handler has returned. It is safe to call
// more than once.
func (s *Server) Close() error { return s.srv.Close() }
