package store

import (
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/internal/clock"
)

// Embedded is the store used when no REDIS_URL is set: an in-process
// miniredis on a random loopback port, its keys' TTLs running on the
// gateway's clock. Its state lives only in this process, so sessions
// cannot move to another gateway node; the caller should say so in its
// logs, and must Close it on shutdown. Its Lua garbage is the process's:
// once a burst of script calls is over, it returns the heap pages the
// burst freed to the OS (memRelease).
type Embedded struct {
	mr  *miniredis.Miniredis
	clk clock.Clock

	mu     sync.Mutex // the tick against Close
	last   time.Time  // the clock at the last tick
	next   clock.Timer
	closed bool
	mem    *memRelease // the pages of a burst's garbage, returned after it
}

// ExpiryTick is how often the embedded store counts its keys' TTLs down.
// miniredis does that only when told (FastForward), so without it no key
// would ever expire: every session record, lease, holder, block and window
// of a long-running gateway would stay in its heap for good. A key goes at
// the first tick after its TTL ran out, up to ExpiryTick late, where Redis
// drops it at once; each tick walks every key (sorted) under miniredis's
// one lock, so it is not made much shorter.
const ExpiryTick = time.Second

// StartEmbedded starts the embedded store, its TTLs counted down on clk
// (nil: the system clock) every ExpiryTick.
func StartEmbedded(clk clock.Clock) (*Embedded, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("embedded redis: start: %w", err)
	}
	e := &Embedded{mr: m, clk: clock.Or(clk), mem: newMemRelease()}
	e.mu.Lock()
	e.last = e.clk.Now()
	e.next = e.clk.AfterFunc(ExpiryTick, e.tick)
	e.mu.Unlock()
	return e, nil
}

// tick counts the keys' TTLs down by the time gone since the last one,
// arms the next, and returns a burst's spare heap pages to the OS once the
// burst is over (memRelease).
func (e *Embedded) tick() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	now := e.clk.Now()
	e.mr.FastForward(now.Sub(e.last))
	e.last = now
	e.next = e.clk.AfterFunc(ExpiryTick, e.tick)
	due := e.mem.due(e.clk.Now())
	e.mu.Unlock()
	if due {
		release()
	}
}

// Addr is the store's address (host:port).
func (e *Embedded) Addr() string { return e.mr.Addr() }

// Close stops the store's clock and the store.
func (e *Embedded) Close() {
	e.mu.Lock()
	e.closed = true
	e.next.Stop()
	e.mu.Unlock()
	e.mr.Close()
}

// Client is a client of the embedded store, as NewRedisClient's but for
// its pool: it keeps at most EmbeddedIdleConns connections once a burst
// of calls is over. miniredis runs one command at a time, under one lock;
// a burst of session starts opens a connection for each call waiting
// there, and go-redis kept every one: 27 after 200 voice sessions started
// at once, each with its buffers at both ends and two goroutines of
// miniredis's whose stacks grew running Lua — about 5 KB of the gateway's
// memory a session (docs/benchmarks.md, "third pass"). A burst still gets
// as many connections as against Redis (a smaller pool makes calls queue
// for one, and session starts time out on a busy machine); what is left
// idle beyond EmbeddedIdleConns is closed. Pipelines take the same
// connections (no pool of their own, whose buffers are 16 KiB).
func (e *Embedded) Client(timeout time.Duration) (redis.UniversalClient, error) {
	o, err := clientOptions(RedisSingle, "redis://"+e.Addr(), timeout)
	if err != nil {
		return nil, err
	}
	o.MaxIdleConns, o.PipelinePoolSize = EmbeddedIdleConns, -1
	return redis.NewUniversalClient(o), nil
}

// EmbeddedIdleConns is how many idle connections a Client of the embedded
// store keeps.
const EmbeddedIdleConns = 4
