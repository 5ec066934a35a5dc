package session

import (
	"context"
	"time"

	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/transport"
)

// startTurn accepts a user input: it is in the history (and, unless Redis
// is down, in the store) before the model is called, then the turn runs in
// its own goroutine so that the reader can still take turn.cancel, confirm
// and ping. kind is "" for typed text and "confirmation" for the answer to
// a confirm.request.
func (c *conn) startTurn(text, kind string) {
	c.m.mu.Lock()
	draining := c.m.draining
	c.m.mu.Unlock()
	if draining {
		c.send(protocol.NewError(protocol.CodeDraining,
			"the gateway is restarting; reconnect and send again", true, 0))
		return
	}
	if until, blocked := c.blocked(); blocked {
		c.send(protocol.NewError(protocol.CodeBlocked,
			"input is refused until "+until.Format(time.RFC3339), false, 0))
		return
	}
	c.turnMu.Lock()
	defer c.turnMu.Unlock()
	select {
	case <-c.closing:
		return // the connection is closing: take no new turn
	default:
	}
	if c.turnDone != nil {
		c.send(protocol.NewError(protocol.CodeTurnInProgress,
			"a turn is running; wait for turn.done or send turn.cancel", true, 0))
		return
	}
	c.mu.Lock()
	c.rec.Turn++
	c.turns++
	turn := c.rec.Turn
	user := transport.Entry{Role: transport.RoleUser, Text: text, Kind: kind, Turn: turn}
	c.history = trimHistory(append(c.history, user), c.m.cfg.HistoryMax)
	note := c.rec.PendingMessage
	c.rec.PendingMessage = ""
	c.mu.Unlock()

	if b := c.persistBegin(user); time.Now().Before(b.Until) {
		// Blocked on another node since this connection last looked: the
		// refused input must not stay in the history (rare, so the undo
		// rewrites the session rather than costing every turn a round trip).
		c.mu.Lock()
		c.rec.Turn--
		c.turns--
		c.history = c.history[:len(c.history)-1]
		c.rec.PendingMessage = note
		c.dirty = true
		c.mu.Unlock()
		c.persist()
		c.setBlocked(b)
		c.send(protocol.NewError(protocol.CodeBlocked, "input is refused until "+b.Until.Format(time.RFC3339), false, 0))
		return
	}
	c.send(protocol.TurnText{Type: protocol.TypeTurnStart, Turn: turn, Text: text, Kind: kind})
	ctx, cancel := context.WithCancel(c.ctx)
	done := make(chan struct{})
	c.turnCancel, c.turnDone = cancel, done
	c.turnWG.Add(1)
	go func() {
		defer c.turnWG.Done()
		defer close(done)
		defer cancel()
		c.runTextTurn(ctx, turn, note)
	}()
}

// endTurn sends turn.done and clears the running turn in one step, so that
// a browser answering turn.done at once is never told a turn is running.
func (c *conn) endTurn(turn int, reason string) {
	c.turnMu.Lock()
	defer c.turnMu.Unlock()
	c.send(protocol.TurnDone{Type: protocol.TypeTurnDone, Turn: turn, Reason: reason})
	c.turnCancel, c.turnDone = nil, nil
}

func (c *conn) cancelTurn() {
	c.turnMu.Lock()
	cancel := c.turnCancel
	c.turnMu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// persistBegin writes a turn's user entry and reads the user's block in one
// round trip; persist writes the turn's other entries. When Redis is
// unreachable the session goes on from memory, and the next write rewrites
// everything.
func (c *conn) persistBegin(user transport.Entry) store.Block {
	var b store.Block
	c.write(func(ctx context.Context, rec store.Record) (err error) {
		b, err = c.m.Store.BeginTurn(ctx, rec, user)
		return err
	})
	return b
}

// persistAsync records the session's record (mode, turn, handle) without
// waiting.
func (c *conn) persistAsync() {
	c.writeAsync(func(ctx context.Context, rec store.Record) error { return c.m.Store.Append(ctx, rec) })
}

func (c *conn) persist(entries ...transport.Entry) {
	c.write(func(ctx context.Context, rec store.Record) error {
		return c.m.Store.Append(ctx, rec, entries...)
	})
}

// write runs a store write on the connection's store goroutine, in order
// with every other write of the connection, and waits for it.
func (c *conn) write(op func(ctx context.Context, rec store.Record) error) {
	done := make(chan struct{})
	c.storeJobs <- func() {
		defer close(done)
		c.doWrite(op)
	}
	<-done
}

// writeAsync queues a store write and returns at once, so that a slow
// Redis never holds up the voice pump. When the queue is full the session
// is marked for a full rewrite at the next write instead.
func (c *conn) writeAsync(op func(ctx context.Context, rec store.Record) error) {
	select {
	case c.storeJobs <- func() { c.doWrite(op) }:
	default:
		c.mu.Lock()
		c.dirty = true
		c.mu.Unlock()
	}
}

// runStore is the connection's store goroutine; it ends when storeJobs is
// closed, after the writes already queued.
func (c *conn) runStore(done chan<- struct{}) {
	defer close(done)
	for job := range c.storeJobs {
		job()
	}
}

func (c *conn) doWrite(op func(ctx context.Context, rec store.Record) error) {
	c.mu.Lock()
	rec, dirty := c.rec, c.dirty
	var hist []transport.Entry
	if dirty {
		hist = append([]transport.Entry(nil), c.history...)
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), c.m.cfg.StoreTimeout)
	defer cancel()
	var err error
	if dirty {
		err = c.m.Store.Sync(ctx, rec, hist)
	} else {
		err = op(ctx, rec)
	}
	c.mu.Lock()
	c.dirty = err != nil
	c.mu.Unlock()
	switch {
	case err != nil:
		c.log.Warn("session store write failed; going on from memory and catching up later", "err", err)
	case dirty:
		c.log.Info("session store caught up after failed writes")
	}
}

// commit adds a finished turn's entries to the history and the store.
func (c *conn) commit(entries []transport.Entry) {
	c.mu.Lock()
	c.history = trimHistory(append(c.history, entries...), c.m.cfg.HistoryMax)
	c.mu.Unlock()
	c.persist(entries...)
}
