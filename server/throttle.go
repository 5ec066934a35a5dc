package server

import (
	"sync"
	"time"
)

// logEvery is how often one kind of refusal or failure may be logged per
// node: a client (or an outage) causing thousands must not cause thousands
// of log lines. Metrics count every one.
const logEvery = time.Minute

// logThrottle lets one log line per key through per interval and counts
// what it held back, so that the line it lets through can say how many
// happened since the last one.
type logThrottle struct {
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	keys map[string]*throttled
}

type throttled struct {
	last time.Time
	held int
}

func newLogThrottle(every time.Duration, now func() time.Time) *logThrottle {
	if now == nil {
		now = time.Now
	}
	return &logThrottle{every: every, now: now, keys: map[string]*throttled{}}
}

// allow reports whether an event of key may be logged now and, if so, how
// many events of key it stands for (itself and those held back since the
// last line). Keys must come from a closed set.
func (t *logThrottle) allow(key string) (count int, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := t.keys[key]
	if k == nil {
		k = &throttled{}
		t.keys[key] = k
	}
	now := t.now()
	if !k.last.IsZero() && now.Sub(k.last) < t.every {
		k.held++
		return 0, false
	}
	count, k.held, k.last = k.held+1, 0, now
	return count, true
}
