package server

import (
	"bufio"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/internal/tlstest"
	"github.com/turnstile-gw/turnstile/internal/wsbuf"
	"github.com/turnstile-gw/turnstile/metrics"
)

// A node that is full says so on /readyz, so that the load balancer sends
// new users elsewhere; it is ready again as soon as a place frees.
func TestReadyzIsNotReadyWhileTheNodeIsFull(t *testing.T) {
	s := newTestServer(t, Config{Edge: Edge{MaxSessions: 1}}, nil)
	readyz := func() (int, string) {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	leave, ok := s.admit.admitSession()
	if !ok {
		t.Fatal("the first session was not admitted")
	}
	if code, body := readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, `"reason":"full"`) ||
		!strings.Contains(body, `"limit":"max_sessions"`) {
		t.Fatalf("/readyz with every session place taken: %d %s, want 503 full (max_sessions)", code, body)
	}
	leave()
	if code, body := readyz(); code != http.StatusOK {
		t.Fatalf("/readyz once the place freed: %d %s", code, body)
	}

	// Every connection taken: the probe itself holds the last one.
	s = newTestServer(t, Config{Edge: Edge{MaxConnections: 2}}, nil)
	addr := serve(t, s.PublicServer(), s.LimitListener)
	other := dialRaw(t, addr)
	if code, err := other.get("/healthz"); code != 200 || err != nil {
		t.Fatalf("/healthz: %d %v", code, err)
	}
	probe := dialRaw(t, addr)
	if code, err := probe.get("/readyz"); code != http.StatusServiceUnavailable || err != nil {
		t.Fatalf("/readyz on the last connection place: %d %v, want 503", code, err)
	}
	_ = other.c.Close()
	testwait.For(t, "/readyz to be ready once a connection closed", func() bool {
		code, err := probe.get("/readyz")
		return code == 200 && err == nil
	})
}

// unauthRefusals is turnstile_refusals_total for a connection refusal.
func unauthRefusals(s *Server, reason string) float64 {
	return testutil.ToFloat64(s.d.Metrics.Refusals.WithLabelValues(reason, metrics.ChannelNone.String()))
}

// idleUnauth is how many unauthenticated connections are between requests.
func idleUnauth(s *Server) int {
	s.conns.mu.Lock()
	defer s.conns.mu.Unlock()
	n := 0
	for e := s.conns.unauth.Front(); e != nil; e = e.Next() {
		if e.Value.(*tracked).state == stateIdle {
			n++
		}
	}
	return n
}

// Under TLS the HTTP server sees the TLS connection; the limits still find
// the connection under it (tls.NewListener's, and wsbuf.TLSListener's, the
// gateway's, under its feed): an idle unauthenticated keep-alive is closed.
func TestUnauthenticatedTLSKeepAliveIsClosedAfterItsIdleTimeout(t *testing.T) {
	for name, listener := range map[string]func(net.Listener, *tls.Config) net.Listener{
		"tls.NewListener": tls.NewListener, "wsbuf.TLSListener": wsbuf.TLSListener} {
		t.Run(name, func(t *testing.T) {
			s := newTestServer(t, Config{Edge: Edge{UnauthIdleTimeout: 100 * time.Millisecond, HTTPIdleTimeout: time.Minute}}, nil)
			cert := tlstest.New(t, "edge")
			dir := t.TempDir()
			certFile, keyFile := cert.Files(t, dir)
			certs, err := LoadCertFiles(certFile, keyFile, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			addr := serve(t, s.PublicServer(), func(ln net.Listener) net.Listener {
				return listener(s.LimitListener(ln), certs.TLSConfig())
			})
			c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: cert.Pool()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			conn := &rawConn{t: t, c: c, r: bufio.NewReader(c)}
			if code, err := conn.get("/healthz"); code != 200 || err != nil {
				t.Fatalf("/healthz over TLS: %d %v", code, err)
			}
			if !conn.closedWithin(10 * time.Second) {
				t.Fatal("an idle unauthenticated TLS connection is still open")
			}
		})
	}
}
