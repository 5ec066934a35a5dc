package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tracing"
)

// server supervises the connection to one MCP server. Its mutable fields
// are guarded by hub.mu.
type server struct {
	hub       *Hub
	cfg       ServerConfig
	client    *sdk.Client
	changed   chan struct{} // tools/list_changed arrived; buffered 1
	firstDone chan struct{} // closed after the first attempt, failed or not
	stderr    *tail         // stdio servers: the end of their stderr

	cs        *sdk.ClientSession // nil while down
	tools     []*tools.Tool      // last accepted list; kept while down
	originals map[string]string  // gateway name → the server's name
	listed    bool
	lastErr   error
	conflict  error
	skipped   []error
}

func newServer(h *Hub, cfg ServerConfig) *server {
	s := &server{hub: h, cfg: cfg, changed: make(chan struct{}, 1), firstDone: make(chan struct{}), stderr: &tail{}}
	s.client = sdk.NewClient(&sdk.Implementation{Name: "turnstile-gateway", Version: h.opts.Version}, &sdk.ClientOptions{
		Logger: h.opts.Log.With("mcp_server", cfg.Name),
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			select {
			case s.changed <- struct{}{}:
			default:
			}
		},
	})
	return s
}

// session is the live connection, or nil while the server is down.
func (s *server) session() *sdk.ClientSession {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return s.cs
}

// run connects, serves until the connection ends, and starts over with
// backoff, until ctx ends.
func (s *server) run(ctx context.Context) {
	opts := s.hub.opts
	log := opts.Log.With("mcp_server", s.cfg.Name, "transport", s.cfg.Transport())
	backoff := opts.MinBackoff
	first := true
	for {
		upSince, err := s.serve(ctx, log, func() {
			if first {
				first = false
				close(s.firstDone)
			}
		})
		if first {
			first = false
			close(s.firstDone)
		}
		if ctx.Err() != nil {
			return
		}
		s.setDown(err)
		if !upSince.IsZero() && clock.Wall.Since(upSince) >= opts.MaxBackoff {
			backoff = opts.MinBackoff // it had been healthy for a while
		}
		log.Warn("MCP server is down; its tools answer TRANSIENT until it is back", "err", err,
			"retry_in", backoff.String())
		timer := clock.Wall.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		backoff = min(2*backoff, opts.MaxBackoff)
		if m := opts.Metrics; m != nil {
			m.MCPRestart(s.cfg.Prefix)
		}
	}
}

// serve makes one connection and keeps it until it ends. upSince is when
// it came up (zero when it never did); the error says why it ended.
func (s *server) serve(ctx context.Context, log *slog.Logger, listedOnce func()) (upSince time.Time, err error) {
	opts := s.hub.opts
	cctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	cs, err := s.client.Connect(cctx, s.transport(), nil)
	cancel()
	if err != nil {
		return time.Time{}, s.withStderr(fmt.Errorf("connect: %w", err))
	}
	wait := make(chan error, 1)
	go func() { wait <- cs.Wait() }()
	defer func() {
		_ = cs.Close() // reaps a stdio process that exited
		<-wait
	}()

	if err := s.list(ctx, cs); err != nil {
		return time.Time{}, s.withStderr(fmt.Errorf("list tools: %w", err))
	}
	upSince = clock.Wall.Now()
	s.setUp(cs)
	listedOnce()
	log.Info("MCP server is up", "tools", len(s.toolsNow()))
	for {
		select {
		case <-ctx.Done():
			return upSince, ctx.Err()
		case err := <-wait:
			wait <- err // for the deferred receive
			if err == nil {
				err = errors.New("the connection closed")
			}
			return upSince, s.withStderr(fmt.Errorf("connection lost: %w", err))
		case <-s.changed:
			if err := s.list(ctx, cs); err != nil {
				log.Warn("MCP server announced new tools, which could not be listed", "err", err)
			}
		}
	}
}

// list fetches the server's tools and hands them to the hub; OnChange runs
// when they changed.
func (s *server) list(ctx context.Context, cs *sdk.ClientSession) error {
	lctx, cancel := context.WithTimeout(ctx, s.hub.opts.StartTimeout)
	defer cancel()
	var got []listed
	var skipped []error
	for t, err := range cs.Tools(lctx, nil) {
		if err != nil {
			return err
		}
		tool, err := s.toolFrom(t)
		if err != nil {
			skipped = append(skipped, err)
			s.hub.opts.Log.Warn("MCP tool left out", "mcp_server", s.cfg.Name, "tool", t.Name, "err", err)
			continue
		}
		got = append(got, listed{tool: tool, original: t.Name})
	}
	sort.Slice(got, func(i, j int) bool { return got[i].tool.Name < got[j].tool.Name })
	notify := s.hub.accept(s, got, skipped)
	if st := s.conflictNow(); st != nil {
		s.hub.opts.Log.Error("MCP tool list refused: two tools would share a name", "mcp_server", s.cfg.Name, "err", st)
	}
	if notify && s.hub.opts.OnChange != nil {
		s.hub.opts.OnChange()
	}
	return nil
}

func (s *server) toolsNow() []*tools.Tool {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return s.tools
}

func (s *server) conflictNow() error {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return s.conflict
}

func (s *server) setUp(cs *sdk.ClientSession) {
	s.hub.mu.Lock()
	s.cs, s.lastErr = cs, nil
	s.hub.mu.Unlock()
	if m := s.hub.opts.Metrics; m != nil {
		m.MCPServerState(s.cfg.Prefix, true)
	}
}

func (s *server) setDown(err error) {
	s.hub.mu.Lock()
	s.cs, s.lastErr = nil, err
	s.hub.mu.Unlock()
	if m := s.hub.opts.Metrics; m != nil {
		m.MCPServerState(s.cfg.Prefix, false)
	}
}

// transport builds a fresh transport for one connection.
func (s *server) transport() sdk.Transport {
	if s.cfg.URL != "" {
		base := s.hub.opts.HTTPClient
		rt := base.Transport
		if rt == nil {
			rt = http.DefaultTransport
		}
		client := *base
		client.Transport = headerTransport{base: rt, header: s.cfg.Headers}
		return &sdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: &client}
	}
	cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
	cmd.Env = append([]string(nil), s.hub.opts.Environ...)
	keys := make([]string, 0, len(s.cfg.Env))
	for k := range s.cfg.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cmd.Env = append(cmd.Env, k+"="+s.cfg.Env[k])
	}
	cmd.Dir = s.cfg.Cwd
	s.stderr.reset()
	cmd.Stderr = s.stderr
	cmd.WaitDelay = 2 * time.Second // a grandchild holding stderr open must not hold up Wait
	return &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
}

// withStderr adds the end of a stdio server's stderr to err, which often
// says why it stopped.
func (s *server) withStderr(err error) error {
	if t := s.stderr.String(); t != "" && s.cfg.URL == "" {
		return fmt.Errorf("%w (stderr: %s)", err, t)
	}
	return err
}

// headerTransport adds a server's configured headers to every request.
type headerTransport struct {
	base   http.RoundTripper
	header map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	traced := trace.SpanContextFromContext(r.Context()).IsValid()
	if len(t.header) == 0 && !traced {
		return t.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	for k, v := range t.header {
		r.Header.Set(k, v)
	}
	// A tool call's request carries its execute_tool span (traceparent).
	tracing.InjectHeader(r.Context(), r.Header)
	return t.base.RoundTrip(r)
}

// tail keeps the last bytes written to it, on one line.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailBytes = 512

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailBytes {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-tailBytes:]...)
	}
	return len(p), nil
}

func (t *tail) reset() {
	t.mu.Lock()
	t.buf = nil
	t.mu.Unlock()
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(strings.Fields(strings.ToValidUTF8(string(t.buf), "?")), " ")
}
