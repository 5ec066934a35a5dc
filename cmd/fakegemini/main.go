// Command fakegemini serves the offline demo model over the real Gemini API
// wire protocol on loopback, for pointing a genai client (or the gateway's
// GEMINI_BASE_URL) at it without a Google account: the REST/SSE text model
// at http://ADDR/ and the Live (BidiGenerateContent WebSocket) voice model
// at ws://ADDR/ (the Go SDK needs ws://; the JS SDK takes http:// and turns
// it into ws:// itself). Both the Gemini API paths (any API key) and the
// Vertex AI paths (any bearer token) are served; -addr 127.0.0.1:0 picks a
// free port, logged as base_url.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/transport/geminilive"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "fakegemini:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("fakegemini", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8090", "listen address")
	pace := fs.Duration("pace", 40*time.Millisecond, "pause between streamed text chunks of the demo model")
	strict := fs.Bool("strict", false, "log every malformed client request as a protocol violation (WARN \"fake gemini: protocol violation\"), see the fakegemini package doc")
	logLevel := fs.String("log-level", "info", "log level: debug (one line per request), info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	srv := fakegemini.New(&fakegemini.DemoBrain{Pace: *pace}, log)
	srv.SetLiveBrain(fakegemini.NewLiveDemo())
	srv.SetStrict(*strict)
	base, err := srv.Start(*addr)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	log.Info("fake Gemini API serving the offline demo model: use it as the base URL with any API key",
		"base_url", base, "live_base_url", geminilive.BaseURL(base), "env", "GEMINI_BASE_URL="+base)

	<-ctx.Done()
	log.Info("shutting down")
	if err := srv.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}
