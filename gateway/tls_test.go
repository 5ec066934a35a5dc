package gateway_test

// TLS on the gateway's own listeners: WebSockets over it, and a certificate
// rotated on disk picked up without a restart.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/internal/tlstest"
)

// startTLSGateway is a gateway whose listeners serve the certificate in
// certFile and keyFile.
func startTLSGateway(t *testing.T, certFile, keyFile string) *testGateway {
	t.Helper()
	cfg := defaultTestConfig(t)
	cfg.TLSCertFile, cfg.TLSKeyFile = certFile, keyFile
	g := startGateway(t, cfg, nil)
	if !strings.HasPrefix(g.url, "https://") || !strings.HasPrefix(g.adminURL, "https://") {
		t.Fatalf("listeners at %s and %s, want https", g.url, g.adminURL)
	}
	return g
}

// dialTLS opens a WebSocket to g trusting only roots.
func (g *testGateway) dialTLS(roots *x509.CertPool) (*wsClient, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	defer tr.CloseIdleConnections()
	u := "wss" + strings.TrimPrefix(g.url, "https") + "/v1/ws"
	c, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{Subprotocols: []string{"turnstile.v1"},
		HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		return nil, err
	}
	if resp.ProtoMajor != 1 || resp.ProtoMinor != 1 {
		t := g.t
		t.Fatalf("upgrade over %s, want HTTP/1.1", resp.Proto)
	}
	c.SetReadLimit(1 << 20)
	g.t.Cleanup(func() { _ = c.CloseNow() })
	return &wsClient{t: g.t, c: c}, nil
}

// servedCert is the common name of the certificate a new TLS connection to
// addr gets, with the TLS version agreed.
func servedCert(t *testing.T, addr string) (string, uint16) {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("TLS to %s: %v", addr, err)
	}
	defer c.Close()
	st := c.ConnectionState()
	return st.PeerCertificates[0].Subject.CommonName, st.Version
}

func TestWebSocketOverTLSKeepsWorkingAcrossACertificateRotation(t *testing.T) {
	first, second := tlstest.New(t, "turnstile-first"), tlstest.New(t, "turnstile-second")
	certFile, keyFile := first.Files(t, t.TempDir())
	g := startTLSGateway(t, certFile, keyFile)
	addr := strings.TrimPrefix(g.url, "https://")

	old, err := g.dialTLS(first.Pool())
	if err != nil {
		t.Fatalf("wss with the first certificate: %v", err)
	}
	old.start(nil)
	if done := ofType(old.ask("How long does shipping take?"), "text.done"); len(done) != 1 || !strings.Contains(done[0].str("text"), "Shipping") {
		t.Fatalf("no answer over wss: %v", done)
	}

	second.Install(t, certFile, keyFile)
	testwait.For(t, "the rotated certificate on new connections", func() bool {
		cn, _ := servedCert(t, addr)
		return cn == "turnstile-second"
	})
	if _, v := servedCert(t, addr); v < tls.VersionTLS12 {
		t.Fatalf("TLS version %x, want 1.2 or later", v)
	}
	// A client that only trusts the old certificate is refused now; one
	// that trusts the new one gets a session.
	if c, err := g.dialTLS(first.Pool()); err == nil {
		_ = c.c.CloseNow()
		t.Fatal("a client trusting only the replaced certificate connected")
	}
	fresh, err := g.dialTLS(second.Pool())
	if err != nil {
		t.Fatalf("wss with the rotated certificate: %v", err)
	}
	fresh.start(nil)
	if done := ofType(fresh.ask("How long does shipping take?"), "text.done"); len(done) != 1 {
		t.Fatalf("no answer over the rotated certificate: %v", done)
	}
	// The connection made before the rotation goes on.
	if done := ofType(old.ask("How long does shipping take?"), "text.done"); len(done) != 1 {
		t.Fatalf("the connection opened before the rotation stopped answering: %v", done)
	}

	// The admin listener serves the same certificate: /metrics over https.
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: second.Pool()}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get(g.adminURL + "/metrics")
	if err != nil {
		t.Fatalf("admin /metrics over TLS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("admin /metrics over TLS: %d", resp.StatusCode)
	}
	// Plain HTTP on a TLS listener gets nothing useful.
	if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP answered 200 on the TLS listener")
		}
	}
}

func TestTLSSettingsNeedBothFilesAndAPairThatLoads(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := tlstest.New(t, "a").Files(t, dir)
	other := tlstest.New(t, "b")
	otherKey := dir + "/other.key"
	other.Install(t, dir+"/other.crt", otherKey)
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"TURNSTILE_TLS_CERT_FILE": certFile}, "TURNSTILE_TLS_CERT_FILE=" + certFile + ": needs TURNSTILE_TLS_KEY_FILE too"},
		{map[string]string{"TURNSTILE_TLS_KEY_FILE": keyFile}, "TURNSTILE_TLS_KEY_FILE=" + keyFile + ": needs TURNSTILE_TLS_CERT_FILE too"},
		{map[string]string{"TURNSTILE_TLS_CERT_FILE": certFile, "TURNSTILE_TLS_KEY_FILE": otherKey}, "private key does not match public key"},
		{map[string]string{"TURNSTILE_TLS_CERT_FILE": dir + "/missing.crt", "TURNSTILE_TLS_KEY_FILE": keyFile}, "TURNSTILE_TLS_CERT_FILE=" + dir + "/missing.crt: cannot use file"},
		{map[string]string{"TURNSTILE_TRUSTED_PROXIES": "10.0.0.0/8,lb.internal"}, `TURNSTILE_TRUSTED_PROXIES=10.0.0.0/8,lb.internal: "lb.internal": not a CIDR`},
	}
	for _, c := range cases {
		_, err := loadTestConfig(t, nil, c.env)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want it to say %q", c.env, err, c.want)
		}
	}
	c, err := loadTestConfig(t, nil, map[string]string{"TURNSTILE_TLS_CERT_FILE": certFile, "TURNSTILE_TLS_KEY_FILE": keyFile,
		"TURNSTILE_TRUSTED_PROXIES": "10.0.0.0/8, 192.168.1.7"})
	if err != nil || c.TLSCertFile != certFile || c.TLSKeyFile != keyFile || len(c.TrustedProxies) != 2 {
		t.Fatalf("a good pair and proxies: %+v, %v", c, err)
	}
}
