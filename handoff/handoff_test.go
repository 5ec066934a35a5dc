package handoff

import (
	"bytes"
	"encoding/json"
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

func newTestDesk(t *testing.T, url string, logTo io.Writer) (*Desk, *prometheus.CounterVec) {
	m := metrics.New(prometheus.NewRegistry(), metrics.Build{})
	d := New(Config{URL: url, Secret: []byte(secret), Backoff: time.Millisecond}, m,
		slog.New(slog.NewJSONHandler(logTo, nil)))
	t.Cleanup(d.Close)
	return d, m.Handoffs
}

func outcome(c *prometheus.CounterVec, o metrics.HandoffOutcome) float64 {
	return testutil.ToFloat64(c.WithLabelValues(string(o)))
}

var notice = Notice{Session: "s_1", User: "alice", Turn: 3, Reason: "refund above the limit",
	Summary: "Wants 300 EUR back for order 1234.", At: time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC)}

func TestDeskRetriesAServerErrorAndDeliversOneSignedNoticeUnderOneKey(t *testing.T) {
	srv := newDesk(t, http.StatusServiceUnavailable, http.StatusBadGateway)
	d, outcomes := newTestDesk(t, srv.URL, io.Discard)
	d.Notify(notice)
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
	var logs syncBuffer
	d, outcomes := newTestDesk(t, srv.URL, &logs)
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
	d, outcomes := newTestDesk(t, srv.URL, io.Discard)
	d.Notify(notice)
	testwait.For(t, "the failure", func() bool { return outcome(outcomes, metrics.HandoffFailed) == 1 })
	if n := srv.count(); n != DefaultAttempts {
		t.Errorf("the desk got %d POSTs, want %d", n, DefaultAttempts)
	}
}

func TestDeskWithoutURLCountsTheHandoffUnsent(t *testing.T) {
	d, outcomes := newTestDesk(t, "", io.Discard)
	d.Notify(notice)
	if outcome(outcomes, metrics.HandoffUnsent) != 1 || outcome(outcomes, metrics.HandoffDelivered) != 0 {
		t.Error("a hand-off without a desk URL is not counted unsent")
	}
}

// syncBuffer is a bytes.Buffer the desk's goroutine may write while the
// test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
