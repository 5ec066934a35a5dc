// Package mcp connects the gateway to MCP tool servers (the Model Context
// Protocol, through the official Go SDK): stdio servers the gateway runs as
// child processes and Streamable HTTP servers it connects to. Each server's
// tools become gateway tools named <server>__<tool>, governed by the same
// pipeline as every other tool; their handlers call the server.
//
// A Hub keeps one connection per server. A stdio server that exits is
// started again, and an HTTP server that cannot be reached is retried, with
// backoff; while a server is down its calls fail TRANSIENT and the rest of
// the gateway carries on. When a server's tool list changes, the hub calls
// OnChange so that the gateway can rebuild its registry.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/tools"
)

// Defaults of Options.
const (
	DefaultStartTimeout = tools.DefaultMCPStartTimeout // the setting's default
	DefaultMinBackoff   = 500 * time.Millisecond
	DefaultMaxBackoff   = 30 * time.Second
)

// DefaultTimeoutMs is an MCP tool's timeout unless the policy sets one.
const DefaultTimeoutMs = 10000

// Options are a Hub's dependencies and tuning. Zero values get defaults.
type Options struct {
	Log *slog.Logger
	// Metrics, when set, gets turnstile_mcp_server_up and
	// turnstile_mcp_restarts_total per server.
	Metrics *metrics.Metrics
	// OnChange is called, from a hub goroutine and never concurrently with
	// itself for one server, after a server's tool list changed once Start
	// has returned (a server came up, or announced tools/list_changed).
	OnChange func()
	// StartTimeout bounds how long Start waits for each server's first
	// connection and tool list, and how long any later connection attempt
	// may take. Default 10 s.
	StartTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before starting a server
	// again or reconnecting: MinBackoff first, doubling, capped at
	// MaxBackoff. Defaults 500 ms and 30 s.
	MinBackoff, MaxBackoff time.Duration
	// Environ is the environment of stdio servers, before each server's
	// own env. Nil: the gateway's PATH, HOME, USER, LOGNAME, SHELL, TERM,
	// TMPDIR, TZ, LANG and LC_* only, so that the gateway's own secrets
	// never reach a child process.
	Environ []string
	// HTTPClient is the base client for HTTP servers; nil: a client of its
	// own. Each server's headers are added to its requests.
	HTTPClient *http.Client
	// Version is reported to servers as the client's version.
	Version string
}

func (o *Options) defaults() {
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(DefaultMaxBackoff, o.MinBackoff)
	}
	if o.Environ == nil {
		o.Environ = baseEnviron(os.Environ())
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{}
	}
	if o.Version == "" {
		o.Version = "dev"
	}
}

// baseEnviron keeps the variables a program needs to run and nothing that
// could be a secret.
func baseEnviron(environ []string) []string {
	keep := map[string]bool{"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "SHELL": true,
		"TERM": true, "TMPDIR": true, "TZ": true, "LANG": true}
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if keep[k] || strings.HasPrefix(k, "LC_") {
			out = append(out, kv)
		}
	}
	return out
}

// Hub connects to the configured MCP servers and keeps their tools.
type Hub struct {
	opts    Options
	servers []*server
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu      sync.Mutex // guards every server's tools and started
	started bool
}

// ServerStatus is what a Hub knows of one server.
type ServerStatus struct {
	Name      string
	Transport string // "stdio" or "http"
	Up        bool
	Listed    bool  // its tools have been listed at least once
	Tools     int   // tools registered from it
	Err       error // why it is down, or why its last tool list was refused
	Skipped   []error
}

// Start connects to every server of cfg and waits until each has listed its
// tools or failed once, within StartTimeout. Servers that are down keep
// being retried in the background; their tools appear (OnChange) when they
// come up. Start fails only when tools of two servers, or two tools of one
// server, would share a gateway name. Close the Hub to stop every server.
func Start(ctx context.Context, cfg *Config, opts Options) (*Hub, error) {
	opts.defaults()
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h := &Hub{opts: opts, cancel: cancel}
	if cfg != nil {
		for _, sc := range cfg.Servers {
			h.servers = append(h.servers, newServer(h, sc))
		}
	}
	for _, s := range h.servers {
		if m := opts.Metrics; m != nil {
			m.MCPServer(s.cfg.Prefix)
		}
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			s.run(ctx)
		}()
	}
	deadline := clock.Wall.NewTimer(opts.StartTimeout)
	defer deadline.Stop()
	for _, s := range h.servers {
		select {
		case <-s.firstDone:
		case <-deadline.C:
		}
	}
	h.mu.Lock()
	h.started = true
	var errs []error
	for _, s := range h.servers {
		if s.conflict != nil {
			errs = append(errs, s.conflict)
		}
	}
	h.mu.Unlock()
	if len(errs) > 0 {
		h.Close()
		return nil, errors.Join(errs...)
	}
	return h, nil
}

// Close stops every server (stdio servers get their stdin closed, then
// SIGTERM, then SIGKILL) and waits for the hub's goroutines.
func (h *Hub) Close() {
	h.cancel()
	h.wg.Wait()
}

// Tools returns the tools of every server that has listed them, in name
// order. A server that went down keeps its tools: their calls fail
// TRANSIENT until it is back.
func (h *Hub) Tools() []*tools.Tool {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*tools.Tool
	for _, s := range h.servers {
		out = append(out, s.tools...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Owns reports whether name is in the namespace of a configured server.
func (h *Hub) Owns(name string) bool {
	return h.serverOf(name) != nil
}

// Missing reports whether name is in the namespace of a configured server
// whose tools have never been listed (it has not been reachable): a policy
// may name such a tool before it exists.
func (h *Hub) Missing(name string) bool {
	s := h.serverOf(name)
	if s == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return !s.listed
}

func (h *Hub) serverOf(name string) *server {
	for _, s := range h.servers {
		if strings.HasPrefix(name, s.cfg.Prefix+"__") {
			return s
		}
	}
	return nil
}

// Status reports every server, by name.
func (h *Hub) Status() []ServerStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]ServerStatus, 0, len(h.servers))
	for _, s := range h.servers {
		st := ServerStatus{Name: s.cfg.Name, Transport: s.cfg.Transport(), Up: s.cs != nil, Listed: s.listed,
			Tools: len(s.tools), Err: s.lastErr, Skipped: append([]error(nil), s.skipped...)}
		if s.conflict != nil {
			st.Err = s.conflict
		}
		out = append(out, st)
	}
	return out
}

// listed is one tool of a server's list: the gateway's tool and the name
// the server gave it.
type listed struct {
	tool     *tools.Tool
	original string
}

// accept records a server's freshly listed tools unless a name collides,
// within the list or with another server's tools. It reports whether
// OnChange is due.
func (h *Hub) accept(s *server, list []listed, skipped []error) (notify bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s.skipped = skipped
	if err := h.collision(s, list); err != nil {
		s.conflict = err
		return false
	}
	s.conflict = nil
	ts := make([]*tools.Tool, len(list))
	s.originals = map[string]string{}
	for i, l := range list {
		ts[i] = l.tool
		s.originals[l.tool.Name] = l.original
	}
	wasListed := s.listed
	s.listed = true
	if wasListed && sameTools(s.tools, ts) {
		return false
	}
	s.tools = ts
	return h.started
}

func (h *Hub) collision(s *server, list []listed) error {
	seen := map[string]string{}
	for _, l := range list {
		if prev, dup := seen[l.tool.Name]; dup {
			return fmt.Errorf("MCP server %s: tools %q and %q both become %s; rename one on the server",
				s.cfg.Name, prev, l.original, l.tool.Name)
		}
		seen[l.tool.Name] = l.original
	}
	for _, other := range h.servers {
		if other == s {
			continue
		}
		for _, t := range other.tools {
			if mine, dup := seen[t.Name]; dup {
				return fmt.Errorf("MCP tool %q of server %s and tool %q of server %s both become %s",
					mine, s.cfg.Name, other.originals[t.Name], other.cfg.Name, t.Name)
			}
		}
	}
	return nil
}

// sameTools compares two lists by content (names, metadata, schemas,
// guides): the version of a registry holding them.
func sameTools(a, b []*tools.Tool) bool {
	if len(a) != len(b) {
		return false
	}
	ra, err1 := tools.Combine(a)
	rb, err2 := tools.Combine(b)
	return err1 == nil && err2 == nil && ra.Version() == rb.Version()
}
