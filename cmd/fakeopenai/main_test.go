package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/openaitext"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestServesTheDemoModelUntilCancelled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", addr, "-pace", "0s"}, func(k string) string {
			if k == "FAKEOPENAI_API_KEY" {
				return "sk-demo"
			}
			return ""
		})
	}()

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	m, err := openaitext.New(openaitext.NewClient(openaitext.ClientConfig{BaseURL: "http://" + addr + "/v1", APIKey: "sk-demo",
		HTTPClient: &http.Client{Transport: tr}}), "demo", openaitext.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	// The server may still be starting.
	testwait.ForNil(t, "a streamed answer", func() error {
		text.Reset()
		for c, err := range m.Stream(t.Context(), transport.TextRequest{History: []transport.Entry{{Role: transport.RoleUser, Text: "hello"}}}) {
			if err != nil {
				return err
			}
			text.WriteString(c.Text)
		}
		return nil
	})
	if !strings.Contains(text.String(), "offline demo model") {
		t.Errorf("greeting = %q", text.String())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}
