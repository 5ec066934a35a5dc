package server

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-gw/turnstile/internal/logtest"
	"github.com/turnstile-gw/turnstile/internal/settings"
	"github.com/turnstile-gw/turnstile/metrics"
)

func TestClientIPIsReadPastTrustedProxiesOnly(t *testing.T) {
	trusted, err := ParseTrustedProxies("10.0.0.0/8, 192.168.1.7, 2001:db8::/32")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		peer    string
		headers map[string][]string
		want    string
	}{
		{"no proxy, no header", "198.51.100.1:5555", nil, "198.51.100.1"},
		{"an IPv6 peer", "[2001:db9::5]:5555", nil, "2001:db9::5"},
		{"untrusted peer: its X-Forwarded-For is ignored", "198.51.100.1:5555",
			map[string][]string{"X-Forwarded-For": {"203.0.113.9"}}, "198.51.100.1"},
		{"untrusted peer: its Forwarded is ignored", "198.51.100.1:5555",
			map[string][]string{"Forwarded": {"for=203.0.113.9"}}, "198.51.100.1"},
		{"trusted proxy, one hop", "10.1.2.3:5555",
			map[string][]string{"X-Forwarded-For": {"203.0.113.9"}}, "203.0.113.9"},
		{"a forged entry left of the real client is not believed", "10.1.2.3:5555",
			map[string][]string{"X-Forwarded-For": {"1.1.1.1, 203.0.113.9"}}, "203.0.113.9"},
		{"two trusted hops, header lines joined", "192.168.1.7:5555",
			map[string][]string{"X-Forwarded-For": {"6.6.6.6, 203.0.113.9", "10.9.9.9"}}, "203.0.113.9"},
		{"trusted proxy without a header is the client", "10.1.2.3:5555", nil, "10.1.2.3"},
		{"only trusted addresses: the leftmost", "10.1.2.3:5555",
			map[string][]string{"X-Forwarded-For": {"10.0.0.1, 10.0.0.2"}}, "10.0.0.1"},
		{"garbage stops at the last trusted hop", "10.1.2.3:5555",
			map[string][]string{"X-Forwarded-For": {"203.0.113.9, unknown"}}, "10.1.2.3"},
		{"Forwarded with a quoted IPv6 and a port", "[2001:db8::1]:443",
			map[string][]string{"Forwarded": {`for=198.51.100.4;proto=https, for="[2001:db9::7]:4711";by=10.0.0.1`}}, "2001:db9::7"},
		{"X-Forwarded-For wins over Forwarded", "10.1.2.3:5555",
			map[string][]string{"Forwarded": {"for=6.6.6.6"}, "X-Forwarded-For": {"203.0.113.9"}}, "203.0.113.9"},
		{"an IPv4-mapped peer is matched as IPv4", "[::ffff:10.1.2.3]:5555",
			map[string][]string{"X-Forwarded-For": {"203.0.113.9"}}, "203.0.113.9"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/v1/ws", nil)
			r.RemoteAddr = c.peer
			for k, vs := range c.headers {
				for _, v := range vs {
					r.Header.Add(k, v)
				}
			}
			if got := trusted.ClientIP(r); got != c.want {
				t.Fatalf("ClientIP = %s, want %s", got, c.want)
			}
		})
	}
}

func TestTrustedProxiesRefuseWhatIsNotANetwork(t *testing.T) {
	for _, bad := range []string{"10.0.0.0/33", "example.com", "10.0.0.1, nope", "fe80::1%eth0", " , "} {
		if _, err := ParseTrustedProxies(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if p, err := ParseTrustedProxies(""); err != nil || len(p) != 0 {
		t.Errorf("empty: %v, %v", p, err)
	}
}

func TestRefusalLogNamesTheForwardedClientOnlyFromATrustedProxy(t *testing.T) {
	for _, c := range []struct {
		name, trusted, want, notWant string
	}{
		{"from a trusted proxy", "127.0.0.0/8", "client_ip=203.0.113.9", "client_ip=127.0.0.1"},
		{"from anyone else", "10.0.0.0/8", "client_ip=127.0.0.1", "203.0.113.9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			trusted, err := ParseTrustedProxies(c.trusted)
			if err != nil {
				t.Fatal(err)
			}
			auth, err := NewAuthenticator(AuthConfig{Auth: Auth{AuthSecret: settings.Secret(strings.Repeat("s", 32))}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(auth.Close)
			logs := &logtest.Buffer{}
			reg := prometheus.NewRegistry()
			s := New(Config{Edge: Edge{TrustedProxies: trusted}}, Deps{Auth: auth, Store: pingOK{}, Metrics: metrics.New(reg, metrics.Build{}),
				Gatherer: reg, Log: slog.New(slog.NewTextHandler(logs, nil))})
			t.Cleanup(s.Close)
			addr := serve(t, s.PublicServer(), s.LimitListener)
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/ws", nil)
			req.Header.Set("X-Forwarded-For", "203.0.113.9")
			req.Header.Set("Authorization", "Bearer not-a-token")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			http.DefaultClient.CloseIdleConnections()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", resp.StatusCode)
			}
			l := logs.String()
			if !strings.Contains(l, "connection refused") || !strings.Contains(l, c.want) || strings.Contains(l, c.notWant) {
				t.Fatalf("refusal log should say %q and not %q:\n%s", c.want, c.notWant, l)
			}
		})
	}
}
