package session

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-gw/turnstile/internal/throttle"
	"github.com/turnstile-gw/turnstile/metrics"
)

// limitCounters are the limits' turnstile_refusals_total series of one
// channel, looked up once (a refusal on the audio path allocates nothing).
type limitCounters [numLimits]prometheus.Counter

func newLimitCounters(m *metrics.Metrics, ch metrics.Channel) *limitCounters {
	var lc limitCounters
	for l := range numLimits {
		lc[l] = m.RefusalCounter(limits[l].label, ch)
	}
	return &lc
}

// refusals count a connection's refusals (turnstile_refusals_total of its
// channel) and keep their log lines to one a minute per reason, with the
// count since the last: per connection, or per node for the limits a
// client meets by reconnecting in a loop (a new connection each time).
// Safe from any of the connection's goroutines.
type refusals struct {
	counters *limitCounters
	node     *throttle.Keyed          // the node's throttles, by reason
	logs     atomic.Pointer[connLogs] // the connection's, made at the first line (connLogs)
}

// connLogs throttle a connection's own log lines: one a minute per limit
// refused, and one for "browser too slow". Most sessions never write one,
// and an idle session should not carry them (800 bytes, a third of the
// connection's struct): they are made the first time one is needed.
type connLogs struct {
	limits [numLimits]throttle.Log
	slow   throttle.Log
}

// note counts one refusal of l at now; it reports whether to log it now,
// and the count since the last line, this one included.
func (r *refusals) note(l limit, now time.Time) (count int, log bool) {
	r.counters[l].Inc()
	if l.perNode() {
		return r.node.Note(l.String(), now, 1)
	}
	return r.throttles().limits[l].Note(now, 1)
}

// tooSlow notes a "browser too slow" close at now, as note.
func (r *refusals) tooSlow(now time.Time) (count int, log bool) {
	return r.throttles().slow.Note(now, 1)
}

// throttles returns the connection's log throttles, making them the first
// time.
func (r *refusals) throttles() *connLogs {
	if l := r.logs.Load(); l != nil {
		return l
	}
	r.logs.CompareAndSwap(nil, new(connLogs))
	return r.logs.Load()
}

// perNode reports whether l's log lines are throttled per node rather than
// per connection.
func (l limit) perNode() bool { return l == limitLiveConnects || l == limitResumes }
