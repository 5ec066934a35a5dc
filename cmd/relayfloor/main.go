// Command relayfloor is the least a voice relay written in Go does, built
// from the gateway's own wire parts, for measuring what the gateway adds
// over them (docs/benchmarks.md, "The floor"). It is a measuring
// instrument, not a product: no authentication, no state store, no
// policy, no metrics, no resumption.
//
// It speaks the subset of the browser protocol that relaybench's load
// generator uses (the same subset as relaybench's Node relay): the first
// text message {"type":"session.start",...} opens one Gemini Live
// WebSocket and is answered {"type":"session.ready","mode":"voice",...}
// once the Live set-up is complete; then every binary message (PCM16
// 16 kHz) goes up as a realtimeInput audio message, and every model audio
// part coming back goes down as a binary message. A {"type":"ping"} is
// answered {"type":"pong"}.
//
// Per session: one goroutine reads the browser's socket and writes the
// upstream's (the gateway's browser reader does the same with a
// microphone chunk); one reads the upstream's and writes the browser's
// (the gateway's voice pump, which writes model audio itself when nothing
// is queued). Both WebSockets are internal/wsbuf's, the base64 is the one
// the gateway's Live adapter uses, the JSON is found by a byte search.
// Nothing is allocated per message.
//
// With -loop (TURNSTILE_ARGS=-loop under relaybench), a session's two
// sockets leave Go's poller after the set-up and are relayed by one
// goroutine waiting on epoll (loop_linux.go): the floor of a Go relay
// without a goroutine per socket. With -coro, the browser's reader — the
// same code as without flags — runs as a coroutine that an epoll loop
// resumes when the browser's socket is readable (coro_linux.go), the
// upstream's keeps its goroutine (-coro-netpoll: the loop's goroutine
// waits in Go's poller; -coro-both: the upstream's reader is a coroutine
// of the loop too): what the gateway's code, unchanged, would cost on a
// loop.
//
// Environment (as relaybench's run.sh starts the gateway): TURNSTILE_ADDR
// (default 127.0.0.1:8080), GEMINI_BASE_URL (http:// or ws://, required),
// GEMINI_API_KEY (sent as x-goog-api-key), GEMINI_LIVE_MODEL, and
// TURNSTILE_PPROF_ADDR: if set, net/http/pprof is served there (as the
// gateway's profiling listener), for scripts/relaybench-pin -p.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	_ "net/http/pprof" // on TURNSTILE_PPROF_ADDR only: the default mux is served nowhere else
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	loopMode := flag.Bool("loop", false, "after a session's set-up, relay its two sockets on one epoll loop (Linux): the floor without a goroutine per socket")
	coroMode := flag.Bool("coro", false, "after a session's set-up, run the browser's reader as a coroutine of an epoll loop (Linux), the upstream's on its goroutine: the gateway's code on a loop")
	coroParked := flag.Bool("coro-netpoll", false, "-coro with the loop's goroutine waiting in Go's poller rather than in epoll_wait")
	coroBoth := flag.Bool("coro-both", false, "-coro with the upstream's reader a coroutine of the loop too: both sockets on the loop, the code unchanged")
	flag.Parse()
	cfg := config{
		loop:  *loopMode,
		coro:  *coroMode || *coroParked || *coroBoth,
		park:  *coroParked,
		both:  *coroBoth,
		addr:  getenv("TURNSTILE_ADDR", "127.0.0.1:8080"),
		base:  os.Getenv("GEMINI_BASE_URL"),
		key:   os.Getenv("GEMINI_API_KEY"),
		model: getenv("GEMINI_LIVE_MODEL", "gemini-2.5-flash-native-audio-preview-09-2025"),
		pprof: os.Getenv("TURNSTILE_PPROF_ADDR"),
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "relayfloor:", err)
		os.Exit(1)
	}
}

func getenv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run(cfg config) error {
	live, err := liveURL(cfg.base)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	r := &relay{live: live, key: cfg.key, model: cfg.model}
	if cfg.loop {
		if r.loop, err = newLoop(); err != nil {
			return err
		}
		defer r.loop.Close()
	}
	if cfg.coro {
		if r.coro, err = newCoroLoop(cfg.park, cfg.both); err != nil {
			return err
		}
		defer r.coro.Close()
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/ws", r)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Close() // hijacked connections are the relay's: they end with the process
	}()
	if cfg.pprof != "" {
		pl, err := net.Listen("tcp", cfg.pprof)
		if err != nil {
			return err
		}
		ps := &http.Server{Handler: http.DefaultServeMux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = ps.Serve(pl) }()
		defer ps.Close()
	}
	log.Printf("relayfloor listening on ws://%s/v1/ws -> %s", ln.Addr(), live)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

type config struct {
	addr, base, key, model, pprof string
	loop, coro, park, both        bool
}

// liveURL is the Gemini API's Live endpoint under base, as the Go SDK
// builds it (ws:// for http://, wss:// for https://).
func liveURL(base string) (string, error) {
	if base == "" {
		return "", errors.New("GEMINI_BASE_URL is required (the Live endpoint's base, e.g. http://127.0.0.1:19100)")
	}
	switch {
	case strings.HasPrefix(base, "http://"):
		base = "ws://" + strings.TrimPrefix(base, "http://")
	case strings.HasPrefix(base, "https://"):
		base = "wss://" + strings.TrimPrefix(base, "https://")
	case strings.HasPrefix(base, "ws://"), strings.HasPrefix(base, "wss://"):
	default:
		return "", fmt.Errorf("GEMINI_BASE_URL %q: not an http, https, ws or wss URL", base)
	}
	return strings.TrimSuffix(base, "/") + "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent", nil
}
