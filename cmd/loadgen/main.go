// Command loadgen opens many voice sessions against a Turnstile gateway on
// this machine and streams speech-like audio at real-time pace, then reports
// round-trip latency percentiles, errors, and the gateway's CPU and memory
// per session (read from its /metrics). It only talks to loopback addresses
// and stops by itself after -duration.
//
//	go run ./cmd/loadgen -sessions 50 -duration 60s -ramp 10s
//
// With -relay it runs relaybench's load instead: 640-byte chunks every
// 20 ms, continuously, and a round trip for each, which needs an upstream
// that echoes (-echo-upstream serves one; start the gateway with
// GEMINI_BASE_URL pointing at it):
//
//	go run ./cmd/loadgen -relay -echo-upstream 127.0.0.1:19100 -sessions 200 -duration 30s -ramp 5s
//
// With -client twilio the same load is phone calls placed as Twilio places
// them (the voice webhook at -url, the signed stream its TwiML names, 20 ms
// μ-law media frames; -twilio-auth-token is the gateway's
// TWILIO_AUTH_TOKEN), each chunk named by its tone since no header
// survives μ-law:
//
//	go run ./cmd/loadgen -client twilio -relay -echo-upstream 127.0.0.1:19100 -sessions 50 \
//	  -url http://127.0.0.1:8080/v1/telephony/twilio -twilio-auth-token "$TWILIO_AUTH_TOKEN"
//
// With -idle it opens idle sessions instead — session.start in text mode,
// then nothing but the answers to the gateway's pings — and reports the
// gateway's RSS, heap, stacks and goroutines per session (docs/benchmarks.md):
//
//	go run ./cmd/loadgen -idle -sessions 9800 -ramp 60s -duration 150s
//
// The exit status is 0 when every session ran to the end without an error,
// 1 when a session failed or an error was counted, 2 for bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "loadgen: %v\n", err)
		return 2
	}
	// Ctrl-C ends the run early; the report covers what ran.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.EchoUpstream != "" {
		echo, err := startEcho(cfg.EchoUpstream, cfg.Client == clientTwilio)
		if err != nil {
			fmt.Fprintf(stderr, "loadgen: %v\n", err)
			return 1
		}
		defer echo.close()
		fmt.Fprintf(stderr, "loadgen: echo upstream on %s (GEMINI_BASE_URL=http://%s)\n", echo.addr, echo.addr)
	}
	if cfg.Idle {
		return idleMain(ctx, cfg, stdout, stderr)
	}
	rep, err := run(ctx, cfg)
	return exitStatus(rep, err, rep != nil && (rep.SessionsFailed > 0 || rep.ErrorCount() > 0), cfg.JSON, stdout, stderr)
}

// report is what a run prints, as text or JSON.
type report interface {
	writeText(io.Writer) error
	writeJSON(io.Writer) error
}

// exitStatus prints rep (or the run's error) and is the exit status: 1 when
// the run failed, could not be printed, or failed is true.
func exitStatus(rep report, err error, failed, asJSON bool, stdout, stderr io.Writer) int {
	if err != nil {
		fmt.Fprintf(stderr, "loadgen: %v\n", err)
		return 1
	}
	if asJSON {
		err = rep.writeJSON(stdout)
	} else {
		err = rep.writeText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "loadgen: write report: %v\n", err)
		return 1
	}
	if failed {
		return 1
	}
	return 0
}

// idleMain runs and reports the idle load (-idle).
func idleMain(ctx context.Context, cfg Config, stdout, stderr io.Writer) int {
	rep, err := runIdle(ctx, cfg)
	return exitStatus(rep, err, rep != nil && (rep.Failed > 0 || rep.Lost > 0), cfg.JSON, stdout, stderr)
}
