// Package throttle keeps a repeated log line to at most one per period,
// carrying how many times it happened since the last one, so that one
// client cannot fill the logs (a connection's refusals, its dropped audio).
package throttle

import (
	"sync"
	"time"
)

// DefaultEvery is the period of a Log whose Every is zero.
const DefaultEvery = time.Minute

// Log gates one kind of log line. The zero value lets a line through at
// most once a minute. It is safe for concurrent use.
type Log struct {
	// Every is the shortest time between two lines; zero is DefaultEvery.
	Every time.Duration

	mu   sync.Mutex
	last time.Time
	n    int
}

// Note counts n occurrences (events, frames, bytes: the caller's unit) at
// now. It reports whether a line may be written now and, if so, the count
// since the last line, this one included.
func (t *Log) Note(now time.Time, n int) (total int, ok bool) {
	every := t.Every
	if every <= 0 {
		every = DefaultEvery
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n += n
	if !t.last.IsZero() && now.Sub(t.last) < every {
		return 0, false
	}
	total, t.last, t.n = t.n, now, 0
	return total, true
}

// Keyed gates one log line per key, each key a Log of its own; keys must
// come from a closed set (reasons, tool names). The zero value is ready,
// with DefaultEvery. It is safe for concurrent use.
type Keyed struct {
	// Every is each key's shortest time between two lines; zero is
	// DefaultEvery.
	Every time.Duration
	logs  sync.Map // key → *Log
}

// Note counts n occurrences of key at now, as Log.Note.
func (k *Keyed) Note(key string, now time.Time, n int) (total int, ok bool) {
	v, found := k.logs.Load(key)
	if !found {
		v, _ = k.logs.LoadOrStore(key, &Log{Every: k.Every})
	}
	return v.(*Log).Note(now, n)
}
