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
	brain             Brain
	log               *slog.Logger
	mux               *http.ServeMux
	*fakeserve.Server // the lifecycle: Handler, InFlight, Close (and Start, below)

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
	s.Server = fakeserve.New("fakegemini", http.HandlerFunc(s.route), func(w http.ResponseWriter, _ *http.Request) {
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

// Start listens on addr (e.g. "127.0.0.1:0") and serves in a goroutine. It
// returns the base URL to give the genai client, e.g.
// "http://127.0.0.1:41234/".
func (s *Server) Start(addr string) (string, error) {
	root, err := s.Server.Start(addr)
	if err != nil {
		return "", err
	}
	return root + "/", nil
}
