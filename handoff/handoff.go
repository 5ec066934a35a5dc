// Package handoff tells a help desk that a conversation was handed to a
// person: a signed JSON POST to TURNSTILE_HANDOFF_URL, retried a bounded
// number of times off the session's path, counted and logged. It knows
// nothing of sessions; the session package hands it a Notice.
package handoff

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/signature"
	"github.com/turnstile-gw/turnstile/metrics"
)

// Notice is what the help desk receives (the POST body, as JSON).
type Notice struct {
	Event   string    `json:"event"` // always "handoff"
	Session string    `json:"session"`
	User    string    `json:"user"`
	Turn    int       `json:"turn"`
	Reason  string    `json:"reason"`
	Summary string    `json:"summary,omitempty"`
	At      time.Time `json:"at"`
	Node    string    `json:"node,omitempty"`
}

// Defaults of Config.
const (
	// DefaultAttempts: a desk that is down for a few seconds still gets
	// the notice; one that is down longer is an operator's matter (the log
	// line says which session, and the event stream and timeline have it).
	DefaultAttempts = 4
	DefaultBackoff  = time.Second
	DefaultTimeout  = 5 * time.Second
)

// Config says where notices go and how hard to try.
type Config struct {
	// URL receives the POST; "": notices are only counted (unsent).
	URL string
	// Secret signs the body (Turnstile-Signature, internal/signature);
	// nil: unsigned.
	Secret []byte
	// Client sends the POSTs; nil: a client of its own.
	Client *http.Client
	// Attempts bounds the POSTs per notice (DefaultAttempts); Backoff is
	// the wait before the second, doubling after (DefaultBackoff); Timeout
	// bounds one POST (DefaultTimeout).
	Attempts int
	Backoff  time.Duration
	Timeout  time.Duration
	// Clock times the waits between attempts; nil: the system clock.
	Clock clock.Clock
}

// Desk delivers notices. Notify never blocks; Close waits for the
// deliveries under way (cutting their waits short).
type Desk struct {
	cfg     Config
	metrics *metrics.Metrics
	log     *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a desk; it counts each notice's outcome in m
// (turnstile_handoffs_total).
func New(cfg Config, m *metrics.Metrics, log *slog.Logger) *Desk {
	if cfg.Attempts <= 0 {
		cfg.Attempts = DefaultAttempts
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	cfg.Clock = clock.Or(cfg.Clock)
	ctx, cancel := context.WithCancel(context.Background())
	return &Desk{cfg: cfg, metrics: m, log: log, ctx: ctx, cancel: cancel}
}

// Notify delivers n in the background.
func (d *Desk) Notify(n Notice) {
	n.Event = "handoff"
	if d.cfg.URL == "" {
		d.metrics.Handoff(metrics.HandoffUnsent)
		return
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.deliver(n)
	}()
}

// Close stops retrying and waits for the deliveries under way.
func (d *Desk) Close() {
	d.cancel()
	d.wg.Wait()
}

// deliver POSTs n until the desk accepts it (2xx), refuses it for good
// (4xx other than 408 and 429), or the attempts are used up.
func (d *Desk) deliver(n Notice) {
	body, err := json.Marshal(n)
	if err != nil {
		d.failed(n, 0, err)
		return
	}
	wait := d.cfg.Backoff
	var last error
	for attempt := 1; attempt <= d.cfg.Attempts; attempt++ {
		if attempt > 1 {
			if !d.sleep(wait) {
				d.failed(n, attempt-1, fmt.Errorf("gateway shutting down; last error: %w", last))
				return
			}
			wait *= 2
		}
		retry, err := d.post(n, body)
		if err == nil {
			d.metrics.Handoff(metrics.HandoffDelivered)
			d.log.Info("hand-off delivered to the help desk", "session", n.Session, "attempts", attempt)
			return
		}
		last = err
		if !retry {
			d.failed(n, attempt, err)
			return
		}
	}
	d.failed(n, d.cfg.Attempts, last)
}

// sleep waits d on the desk's clock; false when the desk closed first.
func (d *Desk) sleep(wait time.Duration) bool {
	done := make(chan struct{})
	t := d.cfg.Clock.AfterFunc(wait, func() { close(done) })
	select {
	case <-done:
		return true
	case <-d.ctx.Done():
		t.Stop()
		return false
	}
}

// post sends one attempt; retry says whether another may succeed.
func (d *Desk) post(n Notice, body []byte) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(d.ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Turnstile-Session", n.Session)
	// The same key on every attempt: a desk that got an attempt whose
	// answer was lost opens one ticket, not two.
	req.Header.Set("Idempotency-Key", "handoff:"+n.Session+":"+n.At.UTC().Format(time.RFC3339Nano))
	if len(d.cfg.Secret) > 0 {
		req.Header.Set(signature.Header, signature.Sign(d.cfg.Secret, clock.Wall.Now(), body))
	}
	resp, err := d.cfg.Client.Do(req)
	if err != nil {
		return true, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return false, nil
	case c == http.StatusRequestTimeout || c == http.StatusTooManyRequests || c >= 500:
		return true, fmt.Errorf("the help desk answered %s", resp.Status)
	default:
		return false, fmt.Errorf("the help desk refused the notice: %s", resp.Status)
	}
}

// failed counts and logs a notice the desk did not get: the operator
// learns which session waits for a person and where to read it.
func (d *Desk) failed(n Notice, attempts int, err error) {
	d.log.Error("hand-off NOT delivered to the help desk: a user waits for a person; pick the session up from "+
		"GET /admin/sessions/{id} or the event stream, and hand it back with POST /admin/sessions/{id}/handback",
		"session", n.Session, "reason", n.Reason, "attempts", attempts, "url", d.cfg.URL, "err", err)
	// Counted after the log line, so whoever sees the count finds the line.
	d.metrics.Handoff(metrics.HandoffFailed)
}
