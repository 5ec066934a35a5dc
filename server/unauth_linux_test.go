package server

// These tests connect from several loopback addresses (127.0.0.2, …), which
// Linux routes without any set-up.

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// dialFrom connects to addr from the loopback address ip.
func dialFrom(t *testing.T, ip, addr string) (*rawConn, error) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = c.Close() })
	return &rawConn{t: t, c: c, r: bufio.NewReader(c)}, nil
}

func mustDialFrom(t *testing.T, ip, addr string) *rawConn {
	t.Helper()
	c, err := dialFrom(t, ip, addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Idle connections that never send a request, from one address, hold at
// most that address's cap; everyone else is served.
func TestIdleConnectionsFromOneIPHoldOnlyTheirCap(t *testing.T) {
	// Silent connections are held past the test (not cut by the header timeout).
	s := newTestServer(t, Config{Edge: Edge{MaxConnections: 400, UnauthPerIP: 8, HTTPReadHeaderTimeout: time.Minute}}, hsAuth(t))
	addr := serve(t, s.PublicServer(), s.LimitListener)
	const flood = 100
	for range flood {
		// One the node resets at once may fail already here: it was
		// accepted and refused all the same.
		_, _ = dialFrom(t, "127.0.0.2", addr)
	}
	testwait.For(t, "every connection beyond the cap to be refused", func() bool {
		return unauthRefusals(s, "unauth_per_ip") == flood-8
	})
	s.conns.mu.Lock()
	held, open := s.conns.byIP["127.0.0.2"].Len(), s.conns.files.Used()
	s.conns.mu.Unlock()
	if held != 8 || open != 8 {
		t.Fatalf("127.0.0.2 holds %d connections (%d open in all), want its cap of 8", held, open)
	}
	user := mustDialFrom(t, "127.0.0.3", addr)
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, err := user.get(path); code != 200 || err != nil {
			t.Fatalf("another client's %s beside the flood: %d %v", path, code, err)
		}
	}
}

// Over its cap a client loses its connection idle the longest (a page
// load's keep-alive), not the one it is opening.
func TestPerIPCapClosesTheClientsLongestIdleConnection(t *testing.T) {
	s := newTestServer(t, Config{Edge: Edge{MaxConnections: 100, UnauthPerIP: 2}}, hsAuth(t))
	addr := serve(t, s.PublicServer(), s.LimitListener)
	a, b := mustDialFrom(t, "127.0.0.2", addr), mustDialFrom(t, "127.0.0.2", addr)
	// a goes idle before b asks: the server marks a connection idle after
	// the client may already have read its answer, so without the wait b
	// could be marked first and be the one idle the longest.
	for i, c := range []*rawConn{a, b} {
		if code, err := c.get("/healthz"); code != 200 || err != nil {
			t.Fatalf("/healthz: %d %v", code, err)
		}
		testwait.For(t, "the keep-alive to be idle", func() bool { return idleUnauth(s) == i+1 })
	}
	c := mustDialFrom(t, "127.0.0.2", addr)
	if code, err := c.get("/healthz"); code != 200 || err != nil {
		t.Fatalf("the client's third connection: %d %v", code, err)
	}
	if !a.closedWithin(5 * time.Second) {
		t.Fatal("the client's longest idle connection is still open")
	}
	if code, err := b.get("/healthz"); code != 200 || err != nil {
		t.Fatalf("the client's other connection: %d %v", code, err)
	}
	if n := unauthRefusals(s, "unauth_per_ip"); n != 1 {
		t.Fatalf("unauth_per_ip refusals = %v, want 1", n)
	}
}

// Unauthenticated connections of many clients hold at most their share of
// the node: a newcomer takes the place of the one idle the longest.
func TestUnauthenticatedShareClosesTheLongestIdleForANewcomer(t *testing.T) {
	s := newTestServer(t, Config{Edge: Edge{MaxConnections: 8, UnauthShare: 0.5}}, hsAuth(t))
	addr := serve(t, s.PublicServer(), s.LimitListener)
	var idlers []*rawConn
	for i := 2; i <= 5; i++ {
		c := mustDialFrom(t, fmt.Sprintf("127.0.0.%d", i), addr)
		if code, err := c.get("/healthz"); code != 200 || err != nil {
			t.Fatalf("/healthz: %d %v", code, err)
		}
		testwait.For(t, "the keep-alive to be idle", func() bool { return idleUnauth(s) == i-1 })
		idlers = append(idlers, c)
	}
	user := mustDialFrom(t, "127.0.0.6", addr)
	if code, err := user.get("/readyz"); code != 200 || err != nil {
		t.Fatalf("a newcomer with the share full: %d %v", code, err)
	}
	if !idlers[0].closedWithin(5 * time.Second) {
		t.Fatal("the connection idle the longest is still open")
	}
	if code, err := idlers[1].get("/healthz"); code != 200 || err != nil {
		t.Fatalf("another idle connection: %d %v", code, err)
	}
	if n := unauthRefusals(s, "unauth_share"); n != 1 {
		t.Fatalf("unauth_share refusals = %v, want 1", n)
	}
}

// An unauthenticated keep-alive is closed after the short idle timeout; a
// trusted proxy's keeps the HTTP idle timeout (the proxy should close
// first).
func TestUnauthenticatedKeepAliveIsClosedAfterItsIdleTimeout(t *testing.T) {
	s := newTestServer(t, Config{Edge: Edge{UnauthIdleTimeout: 100 * time.Millisecond, HTTPIdleTimeout: time.Minute,
		TrustedProxies: TrustedProxies{netip.MustParsePrefix("127.0.0.3/32")}}}, hsAuth(t))
	addr := serve(t, s.PublicServer(), s.LimitListener)
	direct, proxy := mustDialFrom(t, "127.0.0.2", addr), mustDialFrom(t, "127.0.0.3", addr)
	for _, c := range []*rawConn{direct, proxy} {
		if code, err := c.get("/healthz"); code != 200 || err != nil {
			t.Fatalf("/healthz: %d %v", code, err)
		}
	}
	if !direct.closedWithin(10 * time.Second) {
		t.Fatal("an idle unauthenticated connection is still open")
	}
	if code, err := proxy.get("/healthz"); code != 200 || err != nil {
		t.Fatalf("the proxy's keep-alive after the direct one idled out: %d %v", code, err)
	}
}

// getAs sends a keep-alive GET forwarded for client.
func (c *rawConn) getAs(path, client string) (*http.Response, error) {
	_ = c.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.c.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: " + client + "\r\n\r\n")); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return nil, err
	}
	_ = resp.Body.Close()
	return resp, nil
}

// Behind a trusted proxy the cap counts the forwarded client: over it, the
// client's idle connection goes, and with none idle the request is
// answered 429 with Retry-After; other clients of the same proxy are
// served.
func TestPerIPCapBehindATrustedProxyCountsTheForwardedClient(t *testing.T) {
	s := newTestServer(t, Config{Edge: Edge{MaxConnections: 100, UnauthPerIP: 1,
		TrustedProxies: TrustedProxies{netip.MustParsePrefix("127.0.0.2/32")}}}, hsAuth(t))
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	srv := s.PublicServer()
	// /slow stands for a request that takes its time (a slow upload).
	srv.Handler = s.conns.perClient(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		s.Handler().ServeHTTP(w, r)
	}))
	addr := serve(t, srv, s.LimitListener)

	p1, p2 := mustDialFrom(t, "127.0.0.2", addr), mustDialFrom(t, "127.0.0.2", addr)
	if resp, err := p1.getAs("/healthz", "203.0.113.7"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the client's first request: %v %v", resp, err)
	}
	testwait.For(t, "the keep-alive to be idle", func() bool { return idleUnauth(s) == 1 })
	if resp, err := p2.getAs("/healthz", "203.0.113.7"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the client's request on another of the proxy's connections: %v %v", resp, err)
	}
	if !p1.closedWithin(5 * time.Second) {
		t.Fatal("the client's idle connection is still open")
	}
	// p3 serves 203.0.113.8 slowly; p4 comes for the same client.
	p3, p4 := mustDialFrom(t, "127.0.0.2", addr), mustDialFrom(t, "127.0.0.2", addr)
	done := make(chan error, 1)
	go func() {
		_, err := p3.getAs("/slow", "203.0.113.8")
		done <- err
	}()
	testwait.For(t, "the slow request to be served", func() bool {
		s.conns.mu.Lock()
		defer s.conns.mu.Unlock()
		l := s.conns.byIP["203.0.113.8"]
		return l != nil && l.Len() == 1 && l.Front().Value.(*tracked).state == stateActive
	})
	resp, err := p4.getAs("/healthz", "203.0.113.8")
	if err != nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a second connection while the client's first is busy: %v %v, want 429 with Retry-After", resp, err)
	}
	releaseOnce.Do(func() { close(release) })
	if err := <-done; err != nil {
		t.Fatalf("the slow request: %v", err)
	}
	if resp, err := mustDialFrom(t, "127.0.0.2", addr).getAs("/healthz", "203.0.113.9"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("another client of the proxy: %v %v", resp, err)
	}
	if n := unauthRefusals(s, "unauth_per_ip"); n != 2 {
		t.Fatalf("unauth_per_ip refusals = %v, want 2 (one closed, one answered 429)", n)
	}
	if !strings.Contains(resp.Header.Get("Content-Type"), "json") {
		t.Errorf("content type %q", resp.Header.Get("Content-Type"))
	}
}
