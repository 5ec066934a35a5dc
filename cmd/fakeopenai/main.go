// Command fakeopenai serves the offline demo model over the OpenAI Chat
// Completions wire protocol on loopback, for pointing any OpenAI-compatible
// client (or the gateway's OPENAI_BASE_URL with
// TURNSTILE_TEXT_PROVIDER=openai) at it without an account or a GPU.
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

	"github.com/turnstile-gw/turnstile/fake/fakeopenai"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "fakeopenai:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string) error {
	fs := flag.NewFlagSet("fakeopenai", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8091", "listen address")
	pace := fs.Duration("pace", 40*time.Millisecond, "pause between streamed chunks of the demo model")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	// FAKEOPENAI_API_KEY, when set, must be presented as a bearer token, to
	// try a client's key handling; unset, any request is served.
	srv := fakeopenai.New(&fakeopenai.DemoBrain{Pace: *pace}, fakeopenai.Options{APIKey: getenv("FAKEOPENAI_API_KEY"), Log: log})
	base, err := srv.Start(*addr)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	log.Info("fake OpenAI-compatible API serving the offline demo model",
		"base_url", base, "env", "TURNSTILE_TEXT_PROVIDER=openai OPENAI_BASE_URL="+base)

	<-ctx.Done()
	log.Info("shutting down")
	if err := srv.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}
