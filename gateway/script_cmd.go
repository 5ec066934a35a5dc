package gateway

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/internal/script"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/transport"
)

const scriptUsage = `Usage:
  gateway script run [-junit FILE] [-log FILE] [-wait D] SCRIPT.yaml... [-- GATEWAY FLAGS]
        play each policy script (docs/scripts.md) through a gateway assembled in-process: the browser
        protocol on a loopback port, the real pipeline with the tools, policy and MCP servers the
        gateway's own settings name (environment, or the gateway flags after --), embedded Redis, and
        the fake model saying what the script says; every call's outcome is checked

The model, Redis, auth and listeners are the runner's own whatever the settings say: the fake Gemini
model, a fresh embedded Redis per script, dev mode (the anonymous user), loopback ports, no TLS, no
tracing, no per-minute turn limit.
Exit status: 0 every expectation held, 1 a mismatch (or a script could not be played to its end),
2 usage error, an invalid script or an invalid configuration.
`

func scriptCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "run" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, scriptUsage)
			return 0
		}
		fmt.Fprint(stderr, scriptUsage)
		return 2
	}
	fs := flag.NewFlagSet("gateway script run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, scriptUsage); fs.PrintDefaults() }
	junit := fs.String("junit", "", "also write the results as JUnit XML to this file")
	logFile := fs.String("log", "", "write the in-process gateway's log (JSON, debug level) to this file; default: none")
	wait := fs.Duration("wait", script.DefaultWait, "the longest wait for one event from the gateway")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	files, gwFlags := splitDashDash(fs.Args())
	if len(files) == 0 || *wait <= 0 {
		fmt.Fprint(stderr, "gateway script run: name at least one script; -wait must be positive\n"+scriptUsage)
		return 2
	}
	scripts := make([]*script.Script, 0, len(files))
	bad := false
	for _, f := range files {
		s, err := script.Load(f)
		if err != nil {
			fmt.Fprintf(stderr, "gateway script run: %v\n", err)
			bad = true
			continue
		}
		scripts = append(scripts, s)
	}
	cfg, err := loadConfig(gwFlags, getenv, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "gateway script run: invalid configuration:\n%v\n", err)
		}
		return 2
	}
	if bad {
		return 2
	}
	log, closeLog, err := scriptLog(*logFile)
	if err != nil {
		fmt.Fprintf(stderr, "gateway script run: -log: %v\n", err)
		return 2
	}
	defer closeLog()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg = scriptConfig(cfg)
	var reports []*script.Report
	failed := false
	for _, s := range scripts {
		rep, err := runScript(ctx, cfg, log, s, *wait)
		if err != nil {
			fmt.Fprintf(stderr, "gateway script run: %s: %v\n", s.File(), err)
			return 2
		}
		rep.WriteText(stdout)
		reports = append(reports, rep)
		failed = failed || !rep.Passed()
	}
	if *junit != "" {
		if err := writeJUnitFile(*junit, reports); err != nil {
			fmt.Fprintf(stderr, "gateway script run: -junit: %v\n", err)
			return 2
		}
	}
	if failed {
		return 1
	}
	return 0
}

// splitDashDash cuts args at the first "--": the scripts, then the
// gateway's own flags.
func splitDashDash(args []string) (before, after []string) {
	for i, a := range args {
		if a == "--" {
			return args[:i], args[i+1:]
		}
	}
	return args, nil
}

// scriptConfig is the gateway's configuration with what the runner owns
// replaced: the fake model, embedded Redis, dev mode on loopback ports,
// plain HTTP, no tracing, no pprof, and no per-minute turn limit (a script
// types much faster than a person).
func scriptConfig(cfg Config) Config {
	cfg.Addr, cfg.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.RedisURL, cfg.RedisMode, cfg.RedisWaitReplicas = "", store.RedisSingle, 0
	cfg.GeminiAPIKey, cfg.GeminiBaseURL, cfg.UseVertexAI = "", "", false
	cfg.TextProvider = transport.ProviderGemini
	cfg.AuthSecret, cfg.AuthJWKSURL = "", ""
	cfg.TLSCertFile, cfg.TLSKeyFile = "", ""
	cfg.Tracing.Enabled = false
	cfg.PprofAddr = ""
	cfg.TurnsPerMinute = 0
	cfg.ShutdownTimeout = 5 * time.Second
	return cfg
}

// runScript assembles a gateway whose model is a fresh script brain, plays
// s against it through the browser protocol, and drains it.
func runScript(ctx context.Context, cfg Config, log *slog.Logger, s *script.Script, wait time.Duration) (*script.Report, error) {
	brain := fakegemini.NewScript()
	gw, err := New(ctx, cfg, Options{Log: log, TextBrain: brain})
	if err != nil {
		return nil, err
	}
	defer gw.Close()
	if err := gw.Listen(); err != nil {
		return nil, err
	}
	rep := script.Run(ctx, script.Target{URL: gw.URL(), Model: brain, Wait: wait}, s)
	dctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	gw.Shutdown(dctx)
	return rep, nil
}

// scriptLog is the in-process gateway's log: the file at path (debug
// level), or nowhere.
func scriptLog(path string) (*slog.Logger, func(), error) {
	if path == "" {
		return slog.New(slog.DiscardHandler), func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	return slog.New(LogHandler(f, slog.LevelDebug)), func() { _ = f.Close() }, nil
}

func writeJUnitFile(path string, reports []*script.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := script.WriteJUnit(f, reports); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
