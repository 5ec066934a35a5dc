package session

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/transport"
)

// maxQueuedWrites bounds the store writes waiting for their turn: when
// Redis is so slow that more pile up, they are dropped and the next write
// rewrites the whole session instead (a catch-up).
const maxQueuedWrites = 64

// writeOp is one store write; it gets the record as it is when the write
// runs.
type writeOp func(ctx context.Context, rec store.Record) error

// persister runs a connection's store writes one at a time, in order, on a
// goroutine that exists only while there is something to write, so that a
// slow Redis never holds up the browser or the voice pump. When a write
// fails, the session goes on from memory and the next write rewrites the
// record and the whole history.
type persister struct {
	st      *state
	store   store.Store
	timeout time.Duration
	log     *slog.Logger
	ctx     context.Context // the connection's; writes outlive its end

	mu      sync.Mutex
	jobs    []func()
	running bool
	dirty   bool // a write failed or was dropped: rewrite everything next
	// handleQueued: a handle write is queued (see saveHandle).
	handleQueued bool
	wg           sync.WaitGroup
}

// write runs op in order with every other write of the connection, and
// waits for it.
func (p *persister) write(op writeOp) {
	done := make(chan struct{})
	p.enqueue(func() { defer close(done); p.do(op) }, true)
	<-done
}

// writeAsync queues op and returns at once.
func (p *persister) writeAsync(op writeOp) {
	p.enqueue(func() { p.do(op) }, false)
}

func (p *persister) enqueue(job func(), must bool) {
	p.mu.Lock()
	if !must && len(p.jobs) >= maxQueuedWrites {
		p.dirty = true
		p.mu.Unlock()
		return
	}
	p.jobs = append(p.jobs, job)
	if !p.running {
		p.running = true
		p.wg.Add(1)
		go p.drain()
	}
	p.mu.Unlock()
}

func (p *persister) drain() {
	defer p.wg.Done()
	for {
		p.mu.Lock()
		if len(p.jobs) == 0 {
			p.running = false
			p.mu.Unlock()
			return
		}
		job := p.jobs[0]
		p.jobs[0] = nil
		p.jobs = p.jobs[1:]
		p.mu.Unlock()
		job()
	}
}

// wait returns when every queued write has run.
func (p *persister) wait() { p.wg.Wait() }

func (p *persister) do(op writeOp) {
	p.mu.Lock()
	dirty := p.dirty
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), p.timeout)
	defer cancel()
	var err error
	if dirty {
		rec, hist := p.st.snapshot()
		err = p.store.Sync(ctx, rec, hist)
	} else {
		err = op(ctx, p.st.record())
	}
	p.mu.Lock()
	p.dirty = err != nil
	p.mu.Unlock()
	switch {
	case err != nil:
		p.log.Warn("session store write failed; going on from memory and catching up later", "err", err)
	case dirty:
		p.log.Info("session store caught up after failed writes")
	}
}

// markDirty makes the next write a full rewrite.
func (p *persister) markDirty() {
	p.mu.Lock()
	p.dirty = true
	p.mu.Unlock()
}

// appendEntries stores entries (and the record's turn, mode, handle) and
// waits for it.
func (p *persister) appendEntries(entries ...transport.Entry) {
	p.write(func(ctx context.Context, rec store.Record) error { return p.store.Append(ctx, rec, entries...) })
}

// saveHandle stores the record (its newest resumption handle) without
// waiting. Updates that come while one such write waits are covered by it:
// at most one is queued, and it writes the record as it is when it runs.
func (p *persister) saveHandle() {
	p.mu.Lock()
	if p.handleQueued {
		p.mu.Unlock()
		return
	}
	p.handleQueued = true
	p.mu.Unlock()
	p.writeAsync(func(ctx context.Context, rec store.Record) error {
		p.mu.Lock()
		p.handleQueued = false
		p.mu.Unlock()
		return p.store.Append(ctx, rec)
	})
}
