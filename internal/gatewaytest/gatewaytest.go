// Package gatewaytest starts a whole gateway in-process for end-to-end
// tests: assembled and served exactly as the binary does (both listeners,
// on free loopback ports), configured in code rather than through the
// environment, with the offline fake model saying what the test's brains
// say, and stopped when the test ends.
package gatewaytest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
)

// Options are what a test adds to the configuration: the gateway's own
// options (the offline model's brains, test-only tools, Vertex AI
// credentials; its Log and Registry are the harness's, and Reload is
// unused: the harness serves without Serve's signal loop — call
// ReloadTools), and the harness's.
type Options struct {
	gateway.Options
	// RedisURL, when set, is the Redis the gateway keeps its state in
	// (REDIS_URL); "" keeps the configuration's (the embedded one by
	// default).
	RedisURL string
	// LogTo, when set, also receives the gateway's whole log as JSON lines
	// at debug level.
	LogTo io.Writer
}

// Config is the configuration tests start from: the defaults of an empty
// environment (offline model, embedded Redis, dev mode), with a short
// drain and microphone audio taken as fast as the test sends it.
func Config(t testing.TB) gateway.Config {
	t.Helper()
	// The genai SDK reads these from the process's environment itself.
	t.Setenv("GOOGLE_GENAI_USE_VERTEXAI", "")
	t.Setenv("GOOGLE_GEMINI_BASE_URL", "")
	cfg, err := gateway.LoadConfig(nil, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	cfg.ShutdownTimeout = 2 * time.Second
	// Tests stream microphone audio faster than real time; the pacing
	// test turns the pace on.
	cfg.MicPace = 0
	// TURNSTILE_TEST_VOICE_LOOP=false runs the tests with voice sessions
	// served by a goroutine per socket (TURNSTILE_VOICE_LOOP=false, the way
	// of a model connection over TLS); CI runs the voice tests so too.
	if v := os.Getenv("TURNSTILE_TEST_VOICE_LOOP"); v != "" {
		cfg.VoiceLoop = v == "true"
	}
	return cfg
}

// Gateway is a gateway a test started.
type Gateway struct {
	*gateway.Gateway
	URL      string // the public listener: the web client, /v1/ws
	AdminURL string // the admin listener: /metrics, /metrics/summary

	stop   func()
	errors *errorLines
}

// Start assembles and serves a gateway with cfg and opts; the test's
// cleanup drains and stops it. The default listen addresses become free
// loopback ports, and every request the gateway makes of the offline model
// is checked against what the real service accepts.
func Start(t testing.TB, cfg gateway.Config, opts Options) *Gateway {
	t.Helper()
	if cfg.Addr == "" || cfg.Addr == "127.0.0.1:8080" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.AdminAddr == "" || cfg.AdminAddr == "127.0.0.1:9090" {
		cfg.AdminAddr = "127.0.0.1:0"
	}
	if opts.RedisURL != "" {
		cfg.RedisURL = gateway.SecretURL(opts.RedisURL)
	}
	errs := &errorLines{}
	log := slog.New(errorRecorder{Handler: testHandler(t, opts.LogTo), lines: errs})
	gopts := opts.Options
	gopts.Log, gopts.Registry, gopts.Reload = log, prometheus.NewRegistry(), nil
	gw, err := gateway.New(context.Background(), cfg, gopts)
	if err != nil {
		t.Fatalf("assemble: %v", err)
	}
	if fake := gw.OfflineModel(); fake != nil {
		fakegemini.Strict(t, fake)
	}
	if err := gw.Listen(); err != nil {
		gw.Close()
		t.Fatalf("listen: %v", err)
	}
	g := &Gateway{Gateway: gw, URL: gw.URL(), AdminURL: gw.AdminURL(), errors: errs}
	var once sync.Once
	g.stop = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			gw.Shutdown(ctx)
		})
	}
	t.Cleanup(g.stop)
	return g
}

// Stop drains and stops the gateway now (the test's cleanup would).
func (g *Gateway) Stop() { g.stop() }

// Errors are the messages of the ERROR lines the gateway logged so far.
func (g *Gateway) Errors() []string { return g.errors.all() }

// testHandler is the log of a test's gateway: nowhere, or the verbose test
// output at debug level, and logTo as JSON at debug level when set.
func testHandler(t testing.TB, logTo io.Writer) slog.Handler {
	debug := &slog.HandlerOptions{Level: slog.LevelDebug}
	switch {
	case logTo != nil && testing.Verbose():
		return slog.NewJSONHandler(io.MultiWriter(logTo, testWriter{t}), debug)
	case logTo != nil:
		return slog.NewJSONHandler(logTo, debug)
	case testing.Verbose():
		return slog.NewTextHandler(testWriter{t}, debug)
	}
	return slog.DiscardHandler
}

// testWriter writes each log line to the test's output.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// errorLines are the messages of the ERROR log lines a gateway wrote.
type errorLines struct {
	mu    sync.Mutex
	lines []string
}

func (e *errorLines) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.lines...)
}

// errorRecorder passes records on to Handler and notes the ERROR ones.
type errorRecorder struct {
	slog.Handler
	lines *errorLines
}

func (r errorRecorder) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelError || r.Handler.Enabled(ctx, l)
}

func (r errorRecorder) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Level >= slog.LevelError {
		r.lines.mu.Lock()
		r.lines.lines = append(r.lines.lines, rec.Message)
		r.lines.mu.Unlock()
	}
	if !r.Handler.Enabled(ctx, rec.Level) {
		return nil
	}
	return r.Handler.Handle(ctx, rec)
}

func (r errorRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	return errorRecorder{Handler: r.Handler.WithAttrs(as), lines: r.lines}
}

func (r errorRecorder) WithGroup(name string) slog.Handler {
	return errorRecorder{Handler: r.Handler.WithGroup(name), lines: r.lines}
}
