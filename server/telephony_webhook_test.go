package server

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/telephony"
	"github.com/turnstile-gw/turnstile/telephony/twilio"
)

// A client that sends a webhook's headers and then withholds the body is
// answered 400 once the body timeout passes, rather than holding its
// handler and connection for as long as it likes (the public server has no
// ReadTimeout, which would cut WebSockets).
func TestStalledWebhookBodyIsCutAfterTheBodyTimeout(t *testing.T) {
	auth, err := NewAuthenticator(AuthConfig{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	tel := &Telephony{Carrier: &twilio.Carrier{AuthToken: "tok"}, Signer: telephony.NewSigner([]byte("0123456789abcdef0123456789abcdef"), time.Now),
		BodyTimeout: 200 * time.Millisecond, Starts: embeddedStore(t)}
	s := New(Config{}, Deps{Auth: auth, Store: pingOK{}, Metrics: metrics.New(reg, metrics.Build{}), Gatherer: reg,
		Log: slog.New(slog.DiscardHandler), Telephony: tel})
	t.Cleanup(s.Close)
	addr := serve(t, s.PublicServer(), s.LimitListener)

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, err := io.WriteString(c, "POST /v1/telephony/twilio HTTP/1.1\r\nHost: 127.0.0.1\r\n"+
		"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 200\r\n\r\nCallSid=CA1&From="); err != nil {
		t.Fatal(err)
	}
	// The bound on the wait is a failsafe, well above the body timeout:
	// without one the server never answers.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled webhook body: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("stalled webhook body: status %d, want 400", resp.StatusCode)
	}
}
