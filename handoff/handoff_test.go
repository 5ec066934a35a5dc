package handoff

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/logtest"
	"github.com/turnstile-gw/turnstile/internal/signature"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/metrics"
)

const secret = "handoff-test-signing-secret-0123456789"

// desk is a help desk that answers each POST with the next status of
// statuses (then 200) and keeps what it got.
type desk struct {
	*httptest.Server
	mu       sync.Mutex
	statuses []int
	got      []*http.Request
	bodies   [][]byte
}

func newDesk(t *testing.T, statuses ...int) *desk {
	d := &desk{statuses: statuses}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		d.mu.Lock()
		d.got, d.bodies = append(d.got, r), append(d.bodies, b)
		status := http.StatusOK
		if len(d.statuses) > 0 {
			status, d.statuses = d.statuses[0], d.statuses[1:]
		}
		d.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(d.Close)
	return d
}

func (d *desk) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.got)
}

// newTestDesk is a desk at url with the default backoff on clk.
func newTestDesk(t *testing.T, url string, logTo io.Writer, clk clock.Clock) (*Desk, *prometheus.CounterVec) {
	m := metrics.New(prometheus.NewRegistry(), metrics.Build{})
	d := New(Config{URL: url, Secret: []byte(secret), Clock: clk}, m,
		slog.New(slog.NewJSONHandler(logTo, nil)))
	t.Cleanup(d.Close)
	return d, m.Handoffs
}

// retriesAfter steps clk through the desk's waits between attempts: for
// each, once its timer is armed, the next attempt has not started a moment
// before the wait is over, and starts when it is.
func retriesAfter(t *testing.T, clk *clock.Fake, waits ...time.Duration) {
	t.Helper()
	for i, w := range waits {
		testwait.For(t, fmt.Sprintf("the wait before attempt %d", i+2), func() bool { return clk.Timers() == 1 })
		clk.Advance(w - time.Millisecond)
		if clk.Timers() != 1 {
			t.Fatalf("attempt %d started before its %v wait was over", i+2, w)
		}
		clk.Advance(time.Millisecond)
	}
}

func outcome(c *prometheus.CounterVec, o metrics.HandoffOutcome) float64 {
	return testutil.ToFloat64(c.WithLabelValues(string(o)))
}

var notice = Notice{Session: "s_1", User: "alice", Turn: 3, Reason: "refund above the limit",
	Summary: "Wants 300 EUR back for order 1234.", At: time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC)}

func TestDeskRetriesAServerErrorAndDeliversOneSignedNoticeUnderOneKey(t *testing.T) {
	srv := newDesk(t, http.StatusServiceUnavailable, http.StatusBadGateway)
	clk := clock.NewFake(notice.At)
	d, outcomes := newTestDesk(t, srv.URL, io.Discard, clk)
	d.Notify(notice)
	retriesAfter(t, clk, DefaultBackoff, 2*DefaultBackoff) // the backoff doubles
	testwait.For(t, "the delivery", func() bool { return outcome(outcomes, metrics.HandoffDelivered) == 1 })
	if n := srv.count(); n != 3 {
		t.Fatalf("the desk got %d POSTs, want 3 (two 5xx, then accepted)", n)
	}
	keys := map[string]bool{}
	for i, r := range srv.got {
		if err := signature.Verify([]byte(secret), r.Header.Get(signature.Header), srv.bodies[i], time.Now(),
			signature.DefaultTolerance); err != nil {
			t.Errorf("POST %d: %v", i, err)
		}
		keys[r.Header.Get("Idempotency-Key")] = true
	}
	if len(keys) != 1 || keys[""] {
		t.Errorf("idempotency keys %v: want one key on every attempt", keys)
	}
	var got Notice
	if err := json.Unmarshal(srv.bodies[2], &got); err != nil {
		t.Fatal(err)
	}
	want := notice
	want.Event = "handoff"
	if got != want {
		t.Errorf("the desk got %+v, want %+v", got, want)
	}
}

func TestDeskGivesUpOnARefusalAtOnceAndLogsWhatAnOperatorNeeds(t *testing.T) {
	srv := newDesk(t, http.StatusBadRequest)
	var logs logtest.Buffer
	d, outcomes := newTestDesk(t, srv.URL, &logs, nil)
	d.Notify(notice)
	testwait.For(t, "the failure", func() bool { return outcome(outcomes, metrics.HandoffFailed) == 1 })
	if n := srv.count(); n != 1 {
		t.Errorf("the desk got %d POSTs for a 400, want 1 (a refusal is not retried)", n)
	}
	line := logs.String()
	for _, want := range []string{"NOT delivered", `"session":"s_1"`, "/admin/sessions/{id}/handback", "400"} {
		if !strings.Contains(line, want) {
			t.Errorf("the log line lacks %q: %s", want, line)
		}
	}
}

func TestDeskStopsAfterItsAttempts(t *testing.T) {
	srv := newDesk(t, 500, 500, 500, 500, 500, 500)
	clk := clock.NewFake(notice.At)
	d, outcomes := newTestDesk(t, srv.URL, io.Discard, clk)
	d.Notify(notice)
	retriesAfter(t, clk, DefaultBackoff, 2*DefaultBackoff, 4*DefaultBackoff)
	testwait.For(t, "the failure", func() bool { return outcome(outcomes, metrics.HandoffFailed) == 1 })
	if n := srv.count(); n != DefaultAttempts {
		t.Errorf("the desk got %d POSTs, want %d", n, DefaultAttempts)
	}
}

func TestDeskWithoutURLCountsTheHandoffUnsent(t *testing.T) {
	d, outcomes := newTestDesk(t, "", io.Discard, nil)
	d.Notify(notice)
	if outcome(outcomes, metrics.HandoffUnsent) != 1 || outcome(outcomes, metrics.HandoffDelivered) != 0 {
		t.Error("a hand-off without a desk URL is not counted unsent")
	}
}

// A gateway stopping while a notice waits for its next attempt does not
// hold the stop up for the wait: the notice is failed at once, logged for
// an operator.
func TestDeskClosedDuringAWaitGivesUpAtOnce(t *testing.T) {
	srv := newDesk(t, 500, 500)
	clk := clock.NewFake(notice.At)
	d, outcomes := newTestDesk(t, srv.URL, io.Discard, clk)
	d.Notify(notice)
	testwait.For(t, "the wait before the second attempt", func() bool { return clk.Timers() == 1 })
	d.Close()
	if outcome(outcomes, metrics.HandoffFailed) != 1 || srv.count() != 1 || clk.Timers() != 0 {
		t.Errorf("after Close: failed %v, POSTs %d, timers %d; want 1, 1, 0",
			outcome(outcomes, metrics.HandoffFailed), srv.count(), clk.Timers())
	}
}
