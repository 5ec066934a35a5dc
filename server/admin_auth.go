package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// MinAdminTokenBytes is the shortest admin token the gateway accepts.
const MinAdminTokenBytes = 32

// adminGuard requires the admin token on every admin route but /healthz
// and /readyz (probes learn nothing from them), and /metrics when the
// scraper is let in without it. With no token (an admin listener on
// loopback) it lets everything through.
func adminGuard(token string, metricsOpen bool, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/healthz" || r.URL.Path == "/readyz":
		case metricsOpen && r.URL.Path == "/metrics":
		default:
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			sum := sha256.Sum256([]byte(got))
			if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="turnstile-admin"`)
				writeJSON(w, http.StatusUnauthorized, map[string]any{
					"error": "the admin listener needs Authorization: Bearer <TURNSTILE_ADMIN_TOKEN>"})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
