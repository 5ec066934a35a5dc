package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"
)

// Config is one load run.
type Config struct {
	// Client is who calls: "browser" (the WebSocket protocol v1, URL its
	// ws:// endpoint) or "twilio" (phone calls as Twilio places them, URL
	// the voice webhook, http://…/v1/telephony/twilio).
	Client     string
	URL        string        // the gateway's endpoint (loopback only); "" is the client's default
	Sessions   int           // concurrent voice sessions
	Duration   time.Duration // the whole run, from the first session's start
	Ramp       time.Duration // session starts are spread evenly over this
	Speech     time.Duration // speech per cycle, rounded to whole frames
	Silence    time.Duration // silence per cycle, rounded to whole frames
	Token      string        // bearer token; "" sends none (dev-mode gateway)
	MetricsURL string        // the gateway's Prometheus endpoint; "" skips the gateway figures
	JSON       bool          // machine-readable report

	// Relay runs relaybench's load instead of speech and silence: 20 ms
	// chunks continuously, a round trip measured for each. It needs an
	// upstream that echoes (EchoUpstream, or relaybench's fakelive).
	Relay bool
	// Idle runs idle sessions instead: text mode, then nothing but the
	// answers to the gateway's pings (see idle.go).
	Idle bool
	// PprofURL is the gateway's profiling listener (…/debug/pprof/); the
	// idle run has it collect garbage before each reading, and writes the
	// heap profile with all sessions idle to HeapOut. "": neither.
	PprofURL, HeapOut string
	Late              time.Duration // relay: an answer later than this counts as late
	// EchoUpstream serves an echoing fake Gemini Live on this loopback
	// host:port for the whole run; "" serves none.
	EchoUpstream string
	// TwilioAuthToken signs the twilio client's webhook and stream upgrade
	// as Twilio does (the gateway's TWILIO_AUTH_TOKEN); "" signs nothing.
	TwilioAuthToken string
}

// The clients and their default endpoints.
const (
	clientBrowser = "browser"
	clientTwilio  = "twilio"
)

var defaultURL = map[string]string{
	clientBrowser: "ws://127.0.0.1:8080/v1/ws",
	clientTwilio:  "http://127.0.0.1:8080/v1/telephony/twilio",
}

// maxSessions bounds one run; more would not fit this machine anyway.
const maxSessions = 5000

func parseFlags(args []string, usage io.Writer) (Config, error) {
	var c Config
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(usage)
	fs.StringVar(&c.Client, "client", clientBrowser,
		"who calls: browser (WebSocket protocol v1) or twilio (phone calls over Twilio Media Streams: "+
			"20 ms μ-law frames; needs -relay)")
	fs.StringVar(&c.URL, "url", "", "gateway endpoint, loopback hosts only (default "+defaultURL[clientBrowser]+
		" for browser, "+defaultURL[clientTwilio]+" — the voice webhook — for twilio)")
	fs.StringVar(&c.TwilioAuthToken, "twilio-auth-token", "",
		"with -client twilio: sign the webhook and the stream upgrade with this auth token (the gateway's TWILIO_AUTH_TOKEN)")
	fs.IntVar(&c.Sessions, "sessions", 10, "concurrent voice sessions")
	fs.DurationVar(&c.Duration, "duration", 30*time.Second, "total run time; sessions stream until then, then close")
	fs.DurationVar(&c.Ramp, "ramp", 5*time.Second, "spread the session starts evenly over this (less than -duration)")
	fs.DurationVar(&c.Speech, "speech", 1200*time.Millisecond, "speech-like tone per cycle (whole 40 ms frames)")
	fs.DurationVar(&c.Silence, "silence", 2*time.Second,
		"silence per cycle; must outlast the model's answer or the next speech interrupts it")
	fs.StringVar(&c.Token, "token", "", "bearer token for the gateway (unset: none, for a dev-mode gateway)")
	fs.StringVar(&c.MetricsURL, "metrics", "http://127.0.0.1:9090/metrics",
		"gateway Prometheus endpoint (its admin listener, TURNSTILE_ADMIN_ADDR) for CPU, RSS and goroutines (loopback only; empty: skip)")
	fs.BoolVar(&c.JSON, "json", false, "print the report as JSON")
	fs.BoolVar(&c.Relay, "relay", false,
		"relaybench's load: 640-byte chunks every 20 ms, continuously, with a round trip per chunk "+
			"(the gateway's upstream must echo: see -echo-upstream)")
	fs.BoolVar(&c.Idle, "idle", false,
		"idle sessions instead of voice: session.start in text mode, then nothing but ping answers; "+
			"reports the gateway's RSS, heap, stacks and goroutines per session (needs -metrics; up to 60000 sessions)")
	fs.StringVar(&c.PprofURL, "pprof", "", "with -idle: the gateway's profiling listener (http://127.0.0.1:6060/debug/pprof/, "+
		"TURNSTILE_PPROF_ADDR); garbage is collected before each reading, so the figures count live memory")
	fs.StringVar(&c.HeapOut, "heap-out", "", "with -idle and -pprof: write the gateway's heap profile, all sessions idle, to this file")
	fs.DurationVar(&c.Late, "late", 200*time.Millisecond, "with -relay: a round trip longer than this counts as late")
	fs.StringVar(&c.EchoUpstream, "echo-upstream", "",
		"serve an echoing fake Gemini Live on this loopback host:port during the run "+
			"(start the gateway with GEMINI_BASE_URL=http://HOST:PORT and any GEMINI_API_KEY)")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("parse flags: unexpected argument %q", fs.Arg(0))
	}
	if c.URL == "" {
		c.URL = defaultURL[c.Client]
	}
	return c, c.validate()
}

func (c Config) validate() error {
	var errs []error
	switch c.Client {
	case clientBrowser:
		if err := checkLoopbackURL(c.URL, "ws", "wss"); err != nil {
			errs = append(errs, fmt.Errorf("-url: %w", err))
		}
	case clientTwilio:
		if err := checkLoopbackURL(c.URL, "http", "https"); err != nil {
			errs = append(errs, fmt.Errorf("-url (the voice webhook): %w", err))
		}
		if !c.Relay {
			// The speech load's 40 ms PCM frames and its turn events are
			// the browser protocol's; a call carries neither.
			errs = append(errs, errors.New("-client twilio: runs the relay load only; add -relay"))
		}
	default:
		errs = append(errs, fmt.Errorf("-client: %q is not browser or twilio", c.Client))
	}
	if c.MetricsURL != "" {
		if err := checkLoopbackURL(c.MetricsURL, "http", "https"); err != nil {
			errs = append(errs, fmt.Errorf("-metrics: %w", err))
		}
	}
	limit := maxSessions
	if c.Idle {
		limit = maxIdleSessions
		if c.MetricsURL == "" || c.Relay || c.Client != clientBrowser {
			errs = append(errs, errors.New("-idle: needs -metrics and the browser client, and not -relay"))
		}
		if c.PprofURL != "" {
			if err := checkLoopbackURL(c.PprofURL, "http"); err != nil {
				errs = append(errs, fmt.Errorf("-pprof: %w", err))
			}
		}
	}
	if c.Sessions < 1 || c.Sessions > limit {
		errs = append(errs, fmt.Errorf("-sessions: %d is not between 1 and %d", c.Sessions, limit))
	}
	if c.Duration <= 0 {
		errs = append(errs, fmt.Errorf("-duration: %v is not positive", c.Duration))
	}
	if c.Ramp < 0 || c.Ramp >= c.Duration {
		errs = append(errs, fmt.Errorf("-ramp: %v must be at least 0 and less than -duration (%v)", c.Ramp, c.Duration))
	}
	if c.Relay && (c.Late <= 0 || c.Duration > maxRelayDuration) {
		errs = append(errs, fmt.Errorf("-relay: -late %v must be positive and -duration %v at most %v", c.Late, c.Duration, maxRelayDuration))
	}
	if c.EchoUpstream != "" {
		if err := checkLoopbackURL("http://"+c.EchoUpstream, "http"); err != nil {
			errs = append(errs, fmt.Errorf("-echo-upstream: %w", err))
		}
	}
	if c.Speech < frameDur || c.Silence < frameDur {
		errs = append(errs, fmt.Errorf("-speech %v and -silence %v must each last at least one %v frame",
			c.Speech, c.Silence, frameDur))
	}
	return errors.Join(errs...)
}
