package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-gw/turnstile/internal/logtest"
	"github.com/turnstile-gw/turnstile/metrics"
)

// The small abuses of issue 24 that the edge alone answers.

// wsStatus is the edge's answer to a WebSocket request carrying tok (not
// an upgrade: 401 is a refused token, anything else got past it).
func wsStatus(t *testing.T, edge *httptest.Server, tok string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, edge.URL+"/v1/ws", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := edge.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// RFC 7515 §4.1.11: a verifier must refuse a token whose crit header names
// an extension it does not understand; the gateway understands none.
func TestTokenWithAnUnknownCriticalExtensionIsRefused(t *testing.T) {
	edge := httptest.NewServer(newTestServer(t, Config{}, hsAuth(t)).Handler())
	t.Cleanup(edge.Close)
	plain := jwt.NewWithClaims(jwt.SigningMethodHS256, validClaims())
	crit := jwt.NewWithClaims(jwt.SigningMethodHS256, validClaims())
	crit.Header["crit"] = []string{"x-unknown"}
	crit.Header["x-unknown"] = true
	for _, c := range []struct {
		name    string
		tok     *jwt.Token
		refused bool
	}{{"without crit", plain, false}, {"with crit [x-unknown]", crit, true}} {
		raw, err := c.tok.SignedString(authTestSecret)
		if err != nil {
			t.Fatal(err)
		}
		if got := wsStatus(t, edge, raw) == http.StatusUnauthorized; got != c.refused {
			t.Errorf("%s: refused %v, want %v", c.name, got, c.refused)
		}
	}
}

type pingDown struct{}

func (pingDown) Ping(context.Context) error {
	return errors.New("dial tcp 127.0.0.1:6379: connection refused")
}

// /readyz is unauthenticated: during a Redis outage a flood of probes logs
// one WARN per interval (with how many failed), not one per request.
func TestReadyzFailuresDuringAnOutageLogOneLinePerInterval(t *testing.T) {
	logs := &logtest.Buffer{}
	reg := prometheus.NewRegistry()
	auth, err := NewAuthenticator(AuthConfig{})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{}, Deps{Auth: auth, Store: pingDown{}, Metrics: metrics.New(reg, metrics.Build{}), Gatherer: reg,
		Log: slog.New(slog.NewTextHandler(logs, nil))})
	t.Cleanup(s.Close)
	edge := httptest.NewServer(s.Handler())
	t.Cleanup(edge.Close)
	for range 200 {
		resp, err := edge.Client().Get(edge.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("/readyz with Redis down: %d", resp.StatusCode)
		}
	}
	if n := strings.Count(logs.String(), "not ready: session store unreachable"); n != 1 {
		t.Fatalf("%d log lines for 200 failed probes within a minute, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "failures=1") {
		t.Errorf("the line does not count the failures: %s", logs.String())
	}
}
