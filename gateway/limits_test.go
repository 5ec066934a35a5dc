package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/server"
	"github.com/turnstile-gw/turnstile/store"
)

// refusal is how a WebSocket upgrade was refused over plain HTTP.
type refusal struct {
	status     int
	retryAfter string
	body       string
}

// tryUpgrade dials /v1/ws; it returns the client when the upgrade
// succeeded, else the HTTP refusal (status 0: no HTTP answer at all).
func (g *testGateway) tryUpgrade(header http.Header, host string) (*wsClient, refusal) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(g.url, "http") + "/v1/ws"
	c, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{Subprotocols: []string{"turnstile.v1"}, HTTPHeader: header, Host: host})
	if err == nil {
		g.t.Cleanup(func() { _ = c.CloseNow() })
		return &wsClient{t: g.t, c: c}, refusal{}
	}
	if resp == nil {
		return nil, refusal{}
	}
	b, _ := io.ReadAll(resp.Body)
	return nil, refusal{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: string(b)}
}

func TestNodeSessionCapAnswers503WithRetryAfterAndFreesAtOnce(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.MaxSessions = 2
	g := startGateway(t, cfg, fakegemini.NewScript())
	first := g.dial("", nil)
	first.start(nil)
	g.dial("", nil).start(nil)
	if c, r := g.tryUpgrade(nil, ""); c != nil || r.status != http.StatusServiceUnavailable || r.retryAfter == "" ||
		!strings.Contains(r.body, "max_sessions") {
		t.Fatalf("a third session on a 2-session node: %+v, want 503 with Retry-After", r)
	}
	if g.refusals(metrics.RefusedMaxSessions) != 1 {
		t.Fatalf("max_sessions refusals = %v, want 1", g.refusals(metrics.RefusedMaxSessions))
	}
	if n := g.sessionsRefused(string(metrics.RefusedMaxSessions)); n != 1 {
		t.Fatalf("sessions_refused{max_sessions} = %v, want 1", n)
	}
	// Health checks still answer.
	if code, _ := get(t, g.url+"/healthz"); code != 200 {
		t.Fatalf("/healthz on a full node: %d", code)
	}
	_ = first.c.Close(websocket.StatusNormalClosure, "bye")
	testwait.For(t, "the closed session's place to be free", func() bool {
		c, _ := g.tryUpgrade(nil, "")
		return c != nil
	})
}

func TestPerUserCapHoldsAcrossTwoGateways(t *testing.T) {
	addr := redistest.Start(t)
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + addr)
	cfg.AuthSecret = gateway.Secret(strings.Repeat("k", 32))
	cfg.MaxSessionsPerUser = 2
	a := startGateway(t, cfg, fakegemini.NewScript())
	b := startGateway(t, cfg, fakegemini.NewScript())
	alice, bob := bearer(t, cfg, "alice"), bearer(t, cfg, "bob")

	onA := a.dial("", alice)
	onA.start(nil)
	b.dial("", alice).start(nil)
	for name, g := range map[string]*testGateway{"A": a, "B": b} {
		c, r := g.tryUpgrade(alice, "")
		if c != nil || r.status != http.StatusTooManyRequests || r.retryAfter == "" || !strings.Contains(r.body, "max_sessions_per_user") {
			t.Fatalf("alice's third connection on %s: %+v, want 429 with Retry-After", name, r)
		}
	}
	if n := a.refusals(metrics.RefusedMaxSessionsPerUser) + b.refusals(metrics.RefusedMaxSessionsPerUser); n != 2 {
		t.Fatalf("max_sessions_per_user refusals = %v, want 2", n)
	}
	// Another user is not affected.
	b.dial("", bob).start(nil)

	// Closing one of alice's connections frees its slot at once, on any node.
	_ = onA.c.Close(websocket.StatusNormalClosure, "bye")
	testwait.For(t, "alice's closed connection to free a slot", func() bool {
		c, r := b.tryUpgrade(alice, "")
		if c == nil && r.status != http.StatusTooManyRequests {
			t.Fatalf("unexpected refusal %+v", r)
		}
		return c != nil
	})
}

// A node that dies holds its users' connection leases no longer than their
// TTL. The dying node is a process of its own, killed for real (it can
// release nothing); the surviving node reads lease expiry on a fake clock,
// set past the leases' expiry as Redis holds it, so nothing waits out the
// TTL in real time.
func TestAKilledNodesLeasesExpire(t *testing.T) {
	addr := redistest.Start(t)
	secret := strings.Repeat("k", 32)
	dead := startProcess(t, "REDIS_URL=redis://"+addr, "TURNSTILE_AUTH_SECRET="+secret,
		"TURNSTILE_MAX_SESSIONS_PER_USER=2", "TURNSTILE_USER_LEASE_TTL=1s")
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + addr)
	cfg.AuthSecret = gateway.Secret(secret)
	cfg.MaxSessionsPerUser = 2
	cfg.UserLeaseTTL = time.Second
	clk := clock.NewFake(time.Now())
	cfg.Clock = clk
	live := startGateway(t, cfg, fakegemini.NewScript())
	alice := bearer(t, cfg, "alice")
	rdb := redisClientFor(t, cfg)
	// expiries are when alice's leases expire, as Redis holds them: the
	// first node writes them on its own (real) clock.
	expiries := func() (first, last time.Time) {
		zs, err := rdb.ZRangeWithScores(context.Background(), store.UserLeases("alice"), 0, -1).Result()
		if err != nil || len(zs) != 2 {
			t.Fatalf("alice's leases %v (%v), want 2", zs, err)
		}
		first, last = time.UnixMilli(int64(zs[0].Score)), time.UnixMilli(int64(zs[1].Score))
		return first, last
	}

	onDead := &testGateway{t: t, url: dead.url}
	for range 2 {
		c, r := onDead.tryUpgrade(alice, "")
		if c == nil {
			t.Fatalf("alice on the first node: %+v", r)
		}
		c.start(nil)
	}
	if c, r := live.tryUpgrade(alice, ""); c != nil || r.status != http.StatusTooManyRequests {
		t.Fatalf("alice at her limit on the other node: %+v, want 429", r)
	}
	// The renewals go on while the node lives: past the expiry the leases
	// were acquired with, her connections still count.
	_, acquired := expiries()
	testwait.For(t, "the first node to renew alice's leases", func() bool {
		first, _ := expiries()
		return first.After(acquired)
	})
	clk.Set(acquired.Add(time.Millisecond))
	if c, r := live.tryUpgrade(alice, ""); c != nil || r.status != http.StatusTooManyRequests {
		t.Fatalf("alice's renewed leases stopped counting: %+v", r)
	}
	// Killed, the node renews nothing more: once its last expiry has
	// passed, alice is admitted on the other node.
	dead.kill()
	_, last := expiries()
	clk.Set(last.Add(-time.Millisecond))
	if c, r := live.tryUpgrade(alice, ""); c != nil || r.status != http.StatusTooManyRequests {
		t.Fatalf("alice's leases stopped counting before their expiry: %+v", r)
	}
	// (Read again: a renewal the node sent just before it died may land
	// after the first read.)
	testwait.For(t, "alice admitted once the killed node's leases expired", func() bool {
		_, last := expiries()
		clk.Set(last.Add(time.Millisecond))
		c, _ := live.tryUpgrade(alice, "")
		return c != nil
	})
}

func TestTokensAudienceIssuerAndLifetimeAreChecked(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.AuthSecret = gateway.Secret(strings.Repeat("k", 32))
	cfg.AuthAudience, cfg.AuthIssuer, cfg.AuthMaxTTL = "turnstile", "https://idp.example.com", time.Hour
	g := startGateway(t, cfg, fakegemini.NewScript())
	mint := func(ttl time.Duration, aud, iss string) http.Header {
		tok, err := server.MintTokenFor([]byte(cfg.AuthSecret), "alice", ttl, aud, iss)
		if err != nil {
			t.Fatal(err)
		}
		return http.Header{"Authorization": {"Bearer " + tok}}
	}
	for name, h := range map[string]http.Header{
		"no aud":         mint(time.Minute, "", "https://idp.example.com"),
		"other aud":      mint(time.Minute, "billing", "https://idp.example.com"),
		"other iss":      mint(time.Minute, "turnstile", "https://evil.example.com"),
		"beyond max TTL": mint(2*time.Hour, "turnstile", "https://idp.example.com"),
		"already expired": func() http.Header {
			tok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice", "aud": "turnstile",
				"iss": "https://idp.example.com", "exp": time.Now().Add(-time.Hour).Unix()}).SignedString([]byte(cfg.AuthSecret))
			return http.Header{"Authorization": {"Bearer " + tok}}
		}(),
	} {
		if c, r := g.tryUpgrade(h, ""); c != nil || r.status != http.StatusUnauthorized {
			t.Errorf("%s: %+v, want 401", name, r)
		}
	}
	if c, r := g.tryUpgrade(mint(time.Hour, "turnstile", "https://idp.example.com"), ""); c == nil {
		t.Fatalf("a right token: %+v", r)
	} else {
		c.start(nil)
	}
	if n := g.refusals(metrics.RefusedUnauthenticated); n != 5 {
		t.Errorf("unauthenticated refusals = %v, want 5", n)
	}
	if n := g.sessionsRefused(string(metrics.RefusedUnauthenticated)); n != 5 {
		t.Errorf("sessions_refused{unauthenticated} = %v, want 5", n)
	}
}

func TestDevModeRefusesDNSRebindingAndForeignOrigins(t *testing.T) {
	g := startGateway(t, defaultTestConfig(t), fakegemini.NewScript())
	port := g.url[strings.LastIndex(g.url, ":")+1:]
	for name, tc := range map[string]struct{ host, origin string }{
		"rebinding: foreign Host and Origin":      {"evil.example.net:" + port, "http://evil.example.net:" + port},
		"rebinding: foreign Host, no Origin":      {"evil.example.net:" + port, ""},
		"loopback Host, foreign Origin":           {"", "https://evil.example.net"},
		"loopback Host, Origin of another scheme": {"", "null"},
	} {
		h := http.Header{}
		if tc.origin != "" {
			h.Set("Origin", tc.origin)
		}
		if c, r := g.tryUpgrade(h, tc.host); c != nil || r.status != http.StatusForbidden {
			t.Errorf("%s: %+v, want 403", name, r)
		}
	}
	for name, tc := range map[string]struct{ host, origin string }{
		"the page itself":      {"", g.url},
		"localhost by name":    {"localhost:" + port, "http://localhost:" + port},
		"a local dev server":   {"", "http://127.0.0.1:5173"},
		"no Origin (a script)": {"", ""},
	} {
		h := http.Header{}
		if tc.origin != "" {
			h.Set("Origin", tc.origin)
		}
		c, r := g.tryUpgrade(h, tc.host)
		if c == nil {
			t.Fatalf("%s: refused %+v", name, r)
		}
		c.start(nil)
	}
	if n := g.refusals(metrics.RefusedOrigin); n != 4 {
		t.Errorf("origin refusals = %v, want 4", n)
	}
}

func TestAllowListIsEnforcedWithAuthOn(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.AuthSecret = gateway.Secret(strings.Repeat("k", 32))
	cfg.AllowedOrigins = []string{"https://app.example.com"}
	g := startGateway(t, cfg, fakegemini.NewScript())
	h := bearer(t, cfg, "alice")
	h.Set("Origin", "https://evil.example.net")
	if c, r := g.tryUpgrade(h, ""); c != nil || r.status != http.StatusForbidden {
		t.Fatalf("foreign origin with a valid token: %+v, want 403", r)
	}
	h.Set("Origin", "https://app.example.com")
	if c, r := g.tryUpgrade(h, ""); c == nil {
		t.Fatalf("listed origin: %+v", r)
	}
}

func TestConnectionCapKeepsHealthChecksAnswering(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.MaxConnections = 3
	// No share of their own for unauthenticated connections (a quarter of
	// three would leave the probe's keep-alive one place, which the next
	// upgrade's connection would take): the share is unauth tests' matter.
	cfg.UnauthShare = 1
	g := startGateway(t, cfg, fakegemini.NewScript())
	probe := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer probe.CloseIdleConnections()
	getWith := func(c *http.Client, url string) int {
		resp, err := c.Get(url)
		if err != nil {
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := getWith(probe, g.url+"/healthz"); code != 200 { // opens the probe's keep-alive connection
		t.Fatalf("/healthz: %d", code)
	}
	g.dial("", nil).start(nil)
	g.dial("", nil).start(nil)
	if c, r := g.tryUpgrade(nil, ""); c != nil || r.status != 0 {
		t.Fatalf("a fourth connection: %+v, want it closed at accept", r)
	}
	if code := getWith(probe, g.url+"/healthz"); code != 200 {
		t.Fatalf("the open keep-alive /healthz at the cap: %d", code)
	}
	// Full: the load balancer should send new users to another node.
	if code, body := get(t, g.adminURL+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, `"full"`) {
		t.Fatalf("the admin /readyz at the cap: %d %s, want 503 full", code, body)
	}
	if n := g.refusals(metrics.RefusedMaxConnections); n < 1 {
		t.Fatalf("max_connections refusals = %v", n)
	}
}

func TestRedisDownAtAdmissionAdmitsAndCountsIt(t *testing.T) {
	mr := miniredis.RunT(t)
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + mr.Addr())
	cfg.AuthSecret = gateway.Secret(strings.Repeat("k", 32))
	cfg.MaxSessionsPerUser = 1
	g := startGateway(t, cfg, fakegemini.NewScript())
	alice := bearer(t, cfg, "alice")
	mr.Close()
	for i := range 2 {
		if c, r := g.tryUpgrade(alice, ""); c == nil {
			t.Fatalf("connection %d with Redis down: %+v, want admitted (the limit fails open)", i, r)
		}
	}
	failed := testutil.ToFloat64(g.gw.edge.Metrics().RedisErrors.WithLabelValues("lease_acquire"))
	if failed != 2 || g.refusals(metrics.RefusedMaxSessionsPerUser) != 0 {
		t.Fatalf("lease_acquire errors %v, refusals %v; want 2 and 0", failed, g.refusals(metrics.RefusedMaxSessionsPerUser))
	}
}
