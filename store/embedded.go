package store

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/turnstile-gw/turnstile/internal/clock"
)

// Embedded is the store used when no REDIS_URL is set: an in-process
// miniredis on a random loopback port, its keys' TTLs running on the wall
// clock. Its state lives only in this process, so sessions cannot move to
// another gateway node; the caller should say so in its logs, and must
// Close it on shutdown.
type Embedded struct {
	*miniredis.Miniredis
	stop context.CancelFunc
	done chan struct{}
}

// ExpiryTick is how often the embedded store counts its keys' TTLs down.
// miniredis does that only when told (FastForward), so without it no key
// would ever expire: every session record, lease, holder, block and window
// of a long-running gateway would stay in its heap for good. A key goes at
// the first tick after its TTL ran out, up to ExpiryTick late, where Redis
// drops it at once; each tick walks every key (sorted), so it is not made
// much shorter.
const ExpiryTick = time.Second

// StartEmbedded starts the embedded store.
func StartEmbedded() (*Embedded, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("embedded redis: start: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Embedded{Miniredis: m, stop: cancel, done: make(chan struct{})}
	go e.expire(ctx)
	return e, nil
}

// expire counts the keys' TTLs down by the time gone since the last tick,
// every ExpiryTick, until ctx ends.
func (e *Embedded) expire(ctx context.Context) {
	defer close(e.done)
	t := clock.Wall.NewTicker(ExpiryTick)
	defer t.Stop()
	last := clock.Wall.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			e.FastForward(now.Sub(last))
			last = now
		}
	}
}

// Close stops the store's clock and the store.
func (e *Embedded) Close() {
	e.stop()
	<-e.done
	e.Miniredis.Close()
}
