// Command fakegemini serves the offline demo model over the real Gemini API
// wire protocol on loopback, for pointing a genai client (or the gateway's
// GEMINI_BASE_URL) at it without a Google account: the REST/SSE text model
// at http://ADDR/ and the Live (BidiGenerateContent WebSocket) voice model
// at ws://ADDR/.
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

	"github.com/turnstile-gw/turnstile/transport/fakegemini"
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
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	srv := fakegemini.New(&fakegemini.DemoBrain{Pace: *pace}, log)
	srv.SetLiveBrain(fakegemini.NewLiveDemo())
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
