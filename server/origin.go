package server

import (
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"
)

// checkOrigin decides, before anything else, whether a browser page may
// open a WebSocket here. A request without an Origin header is not from a
// browser page and is not Origin-checked (the token still is).
//
//   - An Origin matching TURNSTILE_ALLOWED_ORIGINS is allowed.
//   - In dev mode (no auth, anonymous sessions) the Host must be loopback
//     and so must the Origin: a page on another site whose name an attacker
//     made resolve to 127.0.0.1 (DNS rebinding) shows its own name in both,
//     and must not get an anonymous session.
//   - With auth on, the gateway's own pages (Origin host = Host) are also
//     allowed: such a page still needs a token, which a foreign page cannot
//     obtain (tokens are not cookies).
func (s *Server) checkOrigin(r *http.Request) error {
	dev := s.d.Auth.DevMode()
	if dev && !isLoopbackHost(hostname(r.Host)) {
		return fmt.Errorf("dev mode: Host %q is not a loopback name (127.0.0.1, ::1, localhost)", r.Host)
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("origin %q is not an http(s)://host origin", origin)
	}
	target := strings.ToLower(u.Scheme + "://" + u.Host)
	for _, p := range s.cfg.AllowedOrigins {
		if ok, _ := path.Match(strings.ToLower(p), target); ok {
			return nil
		}
	}
	switch {
	case dev && isLoopbackHost(u.Hostname()):
		return nil
	case dev:
		return fmt.Errorf("dev mode: origin %q is not loopback nor in TURNSTILE_ALLOWED_ORIGINS", origin)
	case strings.EqualFold(u.Host, r.Host):
		return nil
	}
	return fmt.Errorf("origin %q is not in TURNSTILE_ALLOWED_ORIGINS", origin)
}

// hostname is the host of a Host header, without port or brackets.
func hostname(hostport string) string {
	return (&url.URL{Host: hostport}).Hostname()
}
