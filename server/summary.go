package server

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/turnstile-gw/turnstile/metrics"
)

// SummaryHandler serves s's snapshot as indented JSON, the human view next
// to /metrics. Each request renders a fresh snapshot (sorting up to window
// values per tool) and calls the loop-state provider once.
func SummaryHandler(s *metrics.Summary) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": "use GET"})
			return
		}
		b, err := json.MarshalIndent(s.Snapshot(), "", "  ")
		if err != nil {
			// Only a loop-state provider returning something unencodable gets here.
			writeJSON(w, http.StatusInternalServerError,
				map[string]any{"error": fmt.Errorf("metrics summary: encode: %w", err).Error()})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(append(b, '\n'))
	})
}
