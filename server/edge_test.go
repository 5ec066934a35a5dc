package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/metrics"
)

type pingOK struct{}

func (pingOK) Ping(context.Context) error { return nil }

// newTestServer is an edge without sessions: enough for the routes, the
// limits and the checks that happen before an upgrade.
func newTestServer(t testing.TB, cfg Config, auth *Authenticator) *Server {
	t.Helper()
	if auth == nil {
		var err error
		if auth, err = NewAuthenticator(AuthConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	s := New(cfg, Deps{Auth: auth, Store: pingOK{}, Metrics: metrics.New(reg, metrics.Build{}), Gatherer: reg,
		Log: slog.New(slog.DiscardHandler)})
	t.Cleanup(s.Close)
	return s
}

// serve runs srv on a loopback listener wrapped by wrap, until the test ends.
func serve(t testing.TB, srv *http.Server, wrap func(net.Listener) net.Listener) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(wrap(ln))
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return ln.Addr().String()
}

// rawConn is a client connection speaking HTTP/1.1 by hand.
type rawConn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := tryDialRaw(t, addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tryDialRaw connects; a connection the server resets at once (over its
// cap) may already fail here.
func tryDialRaw(t *testing.T, addr string) (*rawConn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = c.Close() })
	return &rawConn{t: t, c: c, r: bufio.NewReader(c)}, nil
}

// get sends a keep-alive GET and returns the status, or an error when the
// connection is gone.
func (c *rawConn) get(path string) (int, error) {
	_ = c.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c.c, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// closedWithin reports whether the server closes the connection within d
// (a read returns EOF or a reset rather than timing out).
func (c *rawConn) closedWithin(d time.Duration) bool {
	_ = c.c.SetReadDeadline(time.Now().Add(d))
	_, err := c.r.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func TestStalledHeadersAndIdleKeepAlivesAreCut(t *testing.T) {
	s := newTestServer(t, Config{Edge: Edge{HTTPReadHeaderTimeout: 200 * time.Millisecond, HTTPIdleTimeout: 300 * time.Millisecond}}, nil)
	addr := serve(t, s.PublicServer(), s.LimitListener)

	stalled := dialRaw(t, addr)
	if _, err := io.WriteString(stalled.c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "); err != nil {
		t.Fatal(err)
	}
	silent := dialRaw(t, addr) // connects and never sends a byte
	idle := dialRaw(t, addr)
	if code, err := idle.get("/healthz"); code != 200 || err != nil {
		t.Fatalf("/healthz: %d %v", code, err)
	}
	for name, c := range map[string]*rawConn{"stalled headers": stalled, "silent": silent, "idle keep-alive": idle} {
		if !c.closedWithin(3 * time.Second) {
			t.Errorf("%s connection still open after its timeout", name)
		}
	}
	// A keep-alive connection in use is not cut.
	busy := dialRaw(t, addr)
	for range 4 {
		if code, err := busy.get("/healthz"); code != 200 || err != nil {
			t.Fatalf("busy keep-alive: %d %v", code, err)
		}
		time.Sleep(100 * time.Millisecond) // less than the idle timeout between requests
	}
}

func TestHeadersOverTheCapAreRefused(t *testing.T) {
	s := newTestServer(t, Config{}, nil)
	addr := serve(t, s.PublicServer(), s.LimitListener)
	c := dialRaw(t, addr)
	_ = c.c.SetDeadline(time.Now().Add(5 * time.Second))
	big := strings.Repeat("x", 24<<10)
	if _, err := fmt.Fprintf(c.c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: %s\r\n\r\n", big); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("24 KiB of headers: HTTP %d, want 431", resp.StatusCode)
	}
	ok := dialRaw(t, addr)
	if code, err := ok.get("/healthz?" + strings.Repeat("t", 8<<10)); code != 200 || err != nil {
		t.Fatalf("an 8 KiB request line: %d %v", code, err)
	}
}

func TestConnectionCapClosesNewConnectionsAndKeepsOpenOnesServed(t *testing.T) {
	s := newTestServer(t, Config{Edge: Edge{MaxConnections: 3}}, nil)
	addr := serve(t, s.PublicServer(), s.LimitListener)

	probe := dialRaw(t, addr) // a load balancer's keep-alive health check
	if code, err := probe.get("/healthz"); code != 200 || err != nil {
		t.Fatalf("/healthz: %d %v", code, err)
	}
	hog1, hog2 := dialRaw(t, addr), dialRaw(t, addr)
	for _, h := range []*rawConn{hog1, hog2} {
		if code, err := h.get("/healthz"); code != 200 || err != nil {
			t.Fatalf("within the cap: %d %v", code, err)
		}
	}
	// Every place taken: a load balancer should send new users elsewhere.
	if code, err := hog2.get("/readyz"); code != http.StatusServiceUnavailable || err != nil {
		t.Fatalf("/readyz at the cap: %d %v, want 503", code, err)
	}
	if over, err := tryDialRaw(t, addr); err == nil {
		if code, err := over.get("/healthz"); err == nil {
			t.Fatalf("a fourth connection was served (HTTP %d)", code)
		}
	}
	if code, err := probe.get("/healthz"); code != 200 || err != nil {
		t.Fatalf("the open health check after the cap was hit: %d %v", code, err)
	}
	if n := testutil.ToFloat64(s.d.Metrics.Refusals.WithLabelValues(string(metrics.RefusedMaxConnections), "none")); n != 1 {
		t.Fatalf("max_connections refusals = %v, want 1", n)
	}
	_ = hog1.c.Close()
	testwait.For(t, "a closed connection to free its place", func() bool {
		c, err := tryDialRaw(t, addr)
		if err != nil {
			return false
		}
		code, err := c.get("/healthz")
		_ = c.c.Close()
		return code == 200 && err == nil
	})
}

func TestMetricsOnlyOnTheAdminHandler(t *testing.T) {
	s := newTestServer(t, Config{}, nil)
	for _, tc := range []struct {
		h    http.Handler
		path string
		want int
	}{
		{s.AdminHandler(), "/metrics", 200},
		{s.AdminHandler(), "/healthz", 200},
		{s.AdminHandler(), "/readyz", 200},
		{s.Handler(), "/metrics", 404},
		{s.Handler(), "/metrics/summary", 404},
		{s.Handler(), "/healthz", 200},
		{s.Handler(), "/readyz", 200},
	} {
		rec := httptest.NewRecorder()
		tc.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if rec.Code != tc.want {
			t.Errorf("%s: HTTP %d, want %d", tc.path, rec.Code, tc.want)
		}
	}
}

func TestOriginAndHostRules(t *testing.T) {
	dev := newTestServer(t, Config{}, nil)
	devAllow := newTestServer(t, Config{Access: Access{AllowedOrigins: []string{"https://app.example.com"}}}, nil)
	authed := newTestServer(t, Config{Access: Access{AllowedOrigins: []string{"https://app.example.com", "https://*.example.org"}}}, hsAuth(t))
	cases := []struct {
		name         string
		s            *Server
		host, origin string
		ok           bool
	}{
		{"dev: loopback host, no origin", dev, "127.0.0.1:8080", "", true},
		{"dev: localhost host and origin", dev, "localhost:8080", "http://localhost:8080", true},
		{"dev: ::1 host, a local dev server's origin", dev, "[::1]:8080", "http://127.0.0.1:3000", true},
		{"dev: DNS rebinding, foreign host and origin", dev, "evil.example.net:8080", "http://evil.example.net:8080", false},
		{"dev: DNS rebinding without origin", dev, "evil.example.net:8080", "", false},
		{"dev: loopback host, foreign origin", dev, "127.0.0.1:8080", "https://evil.example.net", false},
		{"dev: origin null", dev, "127.0.0.1:8080", "null", false},
		{"dev: listed origin", devAllow, "127.0.0.1:8080", "https://app.example.com", true},
		{"dev: listed origin, rebinding host", devAllow, "app.example.com", "https://app.example.com", false},
		{"auth: listed origin", authed, "gw.example.com", "https://app.example.com", true},
		{"auth: wildcard origin", authed, "gw.example.com", "https://a.example.org", true},
		{"auth: own page", authed, "gw.example.com", "https://gw.example.com", true},
		{"auth: foreign origin", authed, "gw.example.com", "https://evil.example.net", false},
		{"auth: listed host, other scheme", authed, "gw.example.com", "http://app.example.com", false},
		{"auth: no origin (not a browser)", authed, "gw.example.com", "", true},
	}
	for _, tc := range cases {
		r := httptest.NewRequest(http.MethodGet, "/v1/ws", nil)
		r.Host = tc.host
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if err := tc.s.checkOrigin(r); (err == nil) != tc.ok {
			t.Errorf("%s: checkOrigin = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if !tc.ok {
			rec := httptest.NewRecorder()
			tc.s.Handler().ServeHTTP(rec, r)
			if rec.Code != http.StatusForbidden {
				t.Errorf("%s: HTTP %d, want 403 before the upgrade", tc.name, rec.Code)
			}
		}
	}
}
