package geminilive_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/geminilive"
)

// Over wss:// (production is TLS to Google) a session connects, sends,
// receives and reads the upstream's close code and reason; the server's
// certificate is verified: with the system's roots, which do not know the
// test's authority, Connect fails.
func TestSessionOverTLS(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer func() { _ = c.CloseNow() }()
		if _, _, err := c.Read(r.Context()); err != nil { // the setup
			return
		}
		if setupComplete(r.Context(), c) != nil {
			return
		}
		_, m, err := c.Read(r.Context())
		if err != nil {
			return
		}
		got <- string(m)
		_ = c.Write(r.Context(), websocket.MessageText, []byte(`{"serverContent":{"outputTranscription":{"text":"over TLS"}}}`))
		_ = c.Close(1008, "Policy violation")
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "https://")
	clearSDKEnv(t)
	client, err := genai.NewClient(context.Background(), &genai.ClientConfig{Backend: genai.BackendGeminiAPI, APIKey: "k",
		HTTPOptions: genai.HTTPOptions{BaseURL: "wss://" + addr + "/"}})
	if err != nil {
		t.Fatal(err)
	}

	m := geminilive.New(client, testModel, geminilive.Options{})
	if _, err := m.Connect(t.Context(), transport.LiveConfig{}); err == nil || !errors.As(err, new(*tls.CertificateVerificationError)) {
		t.Fatalf("Connect with the system's roots = %v, want a certificate verification error", err)
	}

	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	geminilive.SetTLSConfig(m, &tls.Config{RootCAs: roots})
	s := connect(t, m, transport.LiveConfig{})
	must(t, s.SendText("hello over TLS"))
	if m := <-got; !strings.Contains(m, "hello over TLS") {
		t.Errorf("the server got %s", m)
	}
	evs, err := waitEnd(t, receive(t, s))
	if len(evs) != 1 || evs[0].Text != "over TLS" {
		t.Errorf("events = %+v, want the transcript", evs)
	}
	var ce *transport.CloseError
	if !errors.As(err, &ce) || ce.Code != 1008 || ce.Reason != "Policy violation" {
		t.Fatalf("Recv = %v, want *transport.CloseError{1008, \"Policy violation\"}", err)
	}
}
