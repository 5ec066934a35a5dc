package fakeopenai

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/turnstile-gw/turnstile/fake/fakeserve"
)

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
	brain             Brain
	opts              Options
	log               *slog.Logger
	mux               *http.ServeMux
	*fakeserve.Server // the lifecycle: Handler, InFlight, Close (and Start, below)
}

// New returns a server whose model answers come from brain.
func New(brain Brain, opts Options) *Server {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{brain: brain, opts: opts, log: log, mux: http.NewServeMux()}
	s.mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, APIError{Type: "invalid_request_error",
			Message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path)})
	})
	s.Server = fakeserve.New("fakeopenai", s.mux, func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusServiceUnavailable, APIError{Type: "server_error",
			Message: "The fake OpenAI server is shutting down."})
	}, log)
	return s
}

// Start listens on addr (e.g. "127.0.0.1:0") and serves in a goroutine. It
// returns the base URL to give a client, /v1 included, e.g.
// "http://127.0.0.1:41234/v1".
func (s *Server) Start(addr string) (string, error) {
	root, err := s.Server.Start(addr)
	if err != nil {
		return "", err
	}
	return root + "/v1", nil
}
