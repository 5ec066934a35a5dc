package session

import (
	"context"
	"errors"
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
// fails, the session goes on from memory and the next write restores the
// whole session (record, token digest, history, pending confirmations);
// a write that finds the record gone does so at once. A write refused
// because another connection owns the session now (a newer epoch) is not a
// failure: it ends this connection (fenced), and nothing more is written.
type persister struct {
	st      *state
	store   store.Store
	timeout time.Duration
	log     logSource       // the connection's (its logger at each line)
	ctx     context.Context // the connection's; writes outlive its end
	// fenced is told once when a write is refused for a newer owner;
	// restored each time a restore wrote back a session Redis had lost
	// (within the restore's ctx).
	fenced   func()
	restored func(ctx context.Context)

	mu       sync.Mutex
	jobs     []func()
	running  bool
	isFenced bool
	closed   bool // the connection has ended: nothing more is queued
	dirty    bool // a write failed or was dropped: rewrite everything next
	// handleQueued: a handle write is queued (see saveHandle).
	handleQueued bool
	// covered is the state's append mark at the last restore that landed:
	// entries added up to it are in Redis (see uncovered).
	covered uint64
	wg      sync.WaitGroup
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
	if p.closed {
		p.mu.Unlock()
		if must {
			job() // a waiting caller must not hang; the job sees the fence or writes late
		}
		return
	}
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

// finish lets every queued write run and takes no more: the connection
// has ended.
func (p *persister) finish() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *persister) do(op writeOp) {
	p.mu.Lock()
	dirty, fenced := p.dirty, p.isFenced
	p.mu.Unlock()
	if fenced {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), p.timeout)
	defer cancel()
	var err error
	if dirty {
		err = p.restore(ctx)
	} else if err = op(ctx, p.st.record()); errors.Is(err, store.ErrSessionGone) {
		dirty = true
		err = p.restore(ctx)
	}
	fenced = errors.Is(err, store.ErrFenced)
	p.mu.Lock()
	p.dirty = err != nil && !fenced
	p.isFenced = fenced
	p.mu.Unlock()
	switch {
	case fenced:
		p.fenced()
	case err != nil:
		p.log.log().Warn("session store write failed; going on from memory and catching up later", "err", err)
	case dirty:
		p.log.log().Info("session store caught up: the whole session was written back")
	}
}

// restore writes the whole session back.
func (p *persister) restore(ctx context.Context) error {
	rec, hist, pending, mark := p.st.snapshot()
	restored, err := p.store.Restore(ctx, rec, hist, pending)
	if err == nil {
		p.mu.Lock()
		p.covered = max(p.covered, mark)
		p.mu.Unlock()
	}
	if restored {
		p.restored(ctx)
	}
	return err
}

// uncovered is what a queued write still has to append of entries, which
// were in the history by the append mark mark: none when a restore that
// ran since (its snapshot at or past mark) wrote them already. A restore
// queued before a turn's entries (Redis came back, the fence check asked
// for it) but run after they were added would otherwise have the write
// that follows it store them a second time. A mark read later than the
// append is safe: it only makes the entries look less covered.
func (p *persister) uncovered(mark uint64, entries []transport.Entry) []transport.Entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	if mark != 0 && mark <= p.covered {
		return nil
	}
	return entries
}

// restoreSoon queues a restore of the whole session (Redis lost it, or
// writes failed while it was away).
func (p *persister) restoreSoon() {
	p.markDirty()
	p.writeAsync(func(context.Context, store.Record) error { return nil })
}

// needsRestore reports whether a write failed since the last one that
// landed.
func (p *persister) needsRestore() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dirty
}

// markDirty makes the next write a full rewrite.
func (p *persister) markDirty() {
	p.mu.Lock()
	p.dirty = true
	p.mu.Unlock()
}

// appendEntries stores entries, in the history by the append mark mark
// (and the record's turn, mode, handle), and waits for it.
func (p *persister) appendEntries(mark uint64, entries ...transport.Entry) {
	p.write(func(ctx context.Context, rec store.Record) error {
		return p.store.Append(ctx, rec, p.uncovered(mark, entries)...)
	})
}

// undo takes back the user entry of a refused turn (and writes the
// record, whose turn is the one before), without waiting.
func (p *persister) undo(turn int) {
	p.writeAsync(func(ctx context.Context, rec store.Record) error { return p.store.Undo(ctx, rec, turn) })
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

// finalWrite stores the newest state when the browser goes away, the
// voice upstream's resumption handle included, so that a resume anywhere
// continues from here.
func (s *session) finalWrite() {
	if s.st.record().ID == "" {
		return
	}
	s.pst.writeAsync(func(ctx context.Context, rec store.Record) error { return s.m.Store.Append(ctx, rec) })
}
