package gateway_test

// Connects from a second loopback address (127.0.0.2), which Linux routes
// without any set-up.

import (
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/metrics"
)

// needFiles raises the open-file limit to at least n descriptors (up to
// the hard limit), or fails the test naming what is missing.
func needFiles(t *testing.T, n uint64) {
	t.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	if rl.Cur >= n {
		return
	}
	want := rl
	want.Cur = min(n, rl.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil || want.Cur < n {
		t.Fatalf("this test needs %d open files; the limit is %d (hard %d): raise it (ulimit -n)", n, rl.Cur, rl.Max)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl) })
}

// Issue 24, finding 3: 1,000 idle connections that never authenticate,
// from one address, leave a node of 1,000 connections (every other limit at
// its default) open to a real user, who connects from another address,
// authenticates and gets a session; the node stays ready.
func TestThousandIdleUnauthenticatedConnectionsFromOneIPLeaveTheNodeOpen(t *testing.T) {
	const flood = 1000
	needFiles(t, 3*flood)
	cfg := defaultTestConfig(t)
	cfg.AuthSecret = gateway.Secret(strings.Repeat("k", 32))
	// The silent connections stay until the test ends (not cut by the
	// header timeout), so that what the node holds is what the cap holds.
	cfg.HTTPReadHeaderTimeout = time.Minute
	// A node the flood alone would fill without the limits (the probe's
	// node had 383 places).
	cfg.MaxConnections = flood
	g := startGateway(t, cfg, fakegemini.NewScript())
	addr := strings.TrimPrefix(g.url, "http://")

	began := time.Now()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second}
	dialed := 0
	for range flood {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			continue // reset so soon that the dial saw it: accepted and refused all the same
		}
		t.Cleanup(func() { _ = c.Close() })
		dialed++
	}
	want := float64(flood - cfg.UnauthPerIP)
	testwait.For(t, "every connection beyond the per-IP cap to be refused", func() bool {
		return g.refusals(metrics.RefusedUnauthPerIP) == want
	})
	flooded := time.Since(began)

	readyAt := time.Now()
	user := g.dial("", bearer(t, cfg, "alice"))
	if ready := user.start(nil); ready.typ() != "session.ready" || ready.str("sessionId") == "" {
		t.Fatalf("the real user beside the flood got %v, want session.ready", ready)
	}
	connected := time.Since(readyAt)
	if code, body := get(t, g.url+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz beside the flood: %d %s", code, body)
	}
	if n := g.refusals(metrics.RefusedUnauthShare) + g.refusals(metrics.RefusedMaxConnections); n != 0 {
		t.Errorf("%v refusals of other limits, want none: one address may not fill the node", n)
	}
	_ = user.c.Close(websocket.StatusNormalClosure, "bye")
	t.Logf("%d connections from 127.0.0.2 (%d established): %v refused unauth_per_ip and %d held, all accepted within %v; "+
		"a user from 127.0.0.1 then got session.ready in %v",
		flood, dialed, want, cfg.UnauthPerIP, flooded.Round(time.Millisecond), connected.Round(time.Millisecond))
}
