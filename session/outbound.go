package session

import (
	"sync"
	"time"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/stages"
	"github.com/turnstile-gw/turnstile/protocol"
)

// send queues one event. A queue overflow closes the connection as too
// slow (4101): the client may reconnect and resume.
func (c *conn) send(v protocol.Event) {
	b, err := protocol.Encode(v)
	if err != nil {
		c.log().Error("cannot encode event", "err", err)
		return
	}
	c.push(b)
}

func (c *conn) push(b []byte) {
	if !c.q.push(b) {
		c.tooSlow()
	}
}

// sendNow is send for a text turn's events: when nothing is queued and no
// writer runs, the turn's goroutine writes the frame itself, as the
// writer would (one at a time, under the watchdog), rather than wake a
// writer goroutine for it — one hand-off fewer before the browser sees a
// turn's first words. Order is kept: what others queue meanwhile waits
// for a writer started after this write. A browser that does not read
// holds the turn up to WriteTimeout; its connection is then ended as the
// writer's failed write ends it.
func (c *conn) sendNow(v protocol.Event) {
	b, err := protocol.Encode(v)
	if err != nil {
		c.log().Error("cannot encode event", "err", err)
		return
	}
	if !c.q.claim(len(b)) {
		c.push(b)
		return
	}
	if c.ctx.Err() != nil {
		c.writerEnded()
		return
	}
	c.armWatchdog()
	fs := [1]frame{{data: b}}
	if _, ok := c.flush(fs[:]); !ok {
		c.cancel()
		c.writerEnded()
		return
	}
	c.q.release()
}

// sendAudio queues a copy of model audio; false when the browser is too
// slow (and is being closed). A received time that is not zero is timed
// to the frame's write (turnstile_relay_added_seconds, out).
func (c *conn) sendAudio(pcm []byte, received time.Time) bool {
	if !c.q.pushAudio(pcm, received) {
		c.tooSlow()
		return false
	}
	return true
}

func (c *conn) tooSlow() {
	if !c.out.closeNow(protocol.DisconnectTooSlow) {
		return
	}
	if n, ok := c.refusals.tooSlow(c.m.now()); ok {
		c.log().Warn("browser too slow: send queue over its bound, closing", "bound_bytes", c.m.cfg.SendQueueBytes,
			"count", n)
	}
}

// reply queues an answer the browser asked for, built by build to fit
// budget bytes: first a share of the queue's free space, then less while
// other events take the space meanwhile. Such an answer never overflows the
// queue itself (4101 is left to a browser that does not read).
func (c *conn) reply(build func(budget int) protocol.Event) {
	budget := min(c.m.cfg.SendQueueBytes/4, c.q.free())
	for range 4 {
		b, err := protocol.Encode(build(budget))
		if err != nil {
			c.log().Error("cannot encode event", "err", err)
			return
		}
		if c.q.push(b) {
			return
		}
		budget = min(budget, c.q.free()) / 2
	}
	c.send(build(0))
}

// close asks the writer to flush what is queued and close with d. The
// first call wins.
func (c *conn) close(d protocol.Disconnect) { c.out.close(d, false) }

// closer is how a connection ends, decided once.
type closer struct {
	once    sync.Once
	closing chan struct{} // closed when a close is decided
	onClose func()        // called once a close is decided: asks the writer to close

	// later are the closes decided after a store round trip (abuse); the
	// connection's end waits for them.
	later sync.WaitGroup

	mu     sync.Mutex
	d      protocol.Disconnect
	set    bool // d is decided (by a close, or by how reading ended)
	now    bool // drop the queue instead of flushing it
	closed bool
}

// close decides the end once; it reports whether this call decided it.
func (o *closer) close(d protocol.Disconnect, now bool) bool {
	won := false
	o.once.Do(func() {
		o.mu.Lock()
		if !o.set {
			o.d, o.set = d, true
		}
		o.now, o.closed = now, true
		o.mu.Unlock()
		close(o.closing)
		won = true
	})
	if won && o.onClose != nil {
		o.onClose()
	}
	return won
}

func (o *closer) closeNow(d protocol.Disconnect) bool { return o.close(d, true) }

// decided reports whether a close has been decided.
func (o *closer) decided() bool {
	select {
	case <-o.closing:
		return true
	default:
		return false
	}
}

// setReason records how the connection ended when the gateway did not end
// it (the browser left, a read failed); a decided close wins.
func (o *closer) setReason(d protocol.Disconnect) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.set {
		o.d, o.set = d, true
	}
}

func (o *closer) disconnect() protocol.Disconnect {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.set {
		return protocol.DisconnectReadFailed
	}
	return o.d
}

func (o *closer) dropQueue() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.now
}

// write is one run of the writer, started by the queue when a frame is
// pushed and no writer runs: it writes what is queued until the queue is
// empty, and ends. It is the only goroutine writing to the browser while
// it runs. Asked to close, it flushes (or drops) what is queued, sends the
// close frame and ends the connection; no writer starts after that, nor
// after a failed write. Each write is bounded by WriteTimeout through the
// connection's watchdog (one timer per connection that is not touched per
// write: watchdog.go), rather than a context per write.
func (c *conn) write() {
	c.armWatchdog()
	for {
		if c.ctx.Err() != nil {
			c.writerEnded()
			return
		}
		frames, closing, ok := c.q.next(c.spare)
		if !ok {
			return
		}
		if closing && c.out.dropQueue() {
			for i, f := range frames {
				c.q.written(f)
				frames[i] = frame{}
			}
		} else if c.spare, ok = c.flush(frames); !ok {
			c.cancel()
			c.writerEnded()
			return
		}
		if closing {
			c.closeBounded()
			c.cancel()
			c.writerEnded()
			return
		}
	}
}

// armWatchdog makes the writer's watchdog on the first write; the writer
// (one at a time) calls it.
func (c *conn) armWatchdog() {
	if c.watchdog == nil {
		c.watchdog = newWatchdog(c.m.cfg.WriteTimeout, func() {
			c.out.setReason(protocol.DisconnectWriteFailed)
			c.cancel()
		})
	}
}

// writerEnded stops the writer for good (a close was sent, a write
// failed, or the connection ended) and tells run.
func (c *conn) writerEnded() {
	if c.watchdog != nil {
		c.watchdog.stop()
	}
	c.q.endWriter()
	c.wendOnce.Do(func() { close(c.wend) })
}

// flush writes frames; it returns the emptied slice for the next take,
// and false when a write failed.
func (c *conn) flush(frames []frame) (_ []frame, ok bool) {
	ok = true
	for i, f := range frames {
		if ok {
			c.watchdog.begin()
			if err := c.wire.Write(f.binary, f.data); err != nil {
				c.out.setReason(protocol.DisconnectWriteFailed)
				ok = false
			} else if stages.Wrote(); !f.received.IsZero() {
				c.relay.written(f.received)
			}
			c.watchdog.end()
		}
		c.q.written(f)
		frames[i] = frame{}
	}
	if cap(frames) > keptFrames {
		return nil, ok // grown by a backlog: not kept
	}
	return frames[:0], ok
}

// closeBounded sends the close frame and waits for the browser's answer
// (which the reader receives), but no longer than the write timeout: a
// client too slow to read its socket cannot even take the close frame.
// (CloseNow cannot interrupt a Close in progress.)
func (c *conn) closeBounded() {
	d := c.out.disconnect()
	if d.Code == 0 {
		return // the connection is already gone: nothing to tell
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.wire.Close(d.Code, protocol.CloseReason(d.Reason))
	}()
	select {
	case <-done:
	case <-clock.Wall.After(c.m.cfg.WriteTimeout):
		// Cancelling the connection's context closes the socket, which ends
		// the stuck close handshake.
		c.cancel()
		<-done
	}
}

// The connection as its session reaches it (outbound, session.go).

var _ outbound = (*conn)(nil)

func (c *conn) closeWith(d protocol.Disconnect) bool { return c.out.close(d, false) }
func (c *conn) closing() bool                        { return c.out.decided() }
func (c *conn) abort()                               { c.cancel() }
func (c *conn) ended() <-chan struct{}               { return c.done }
func (c *conn) dropAudio()                           { c.q.dropAudio() }
func (c *conn) audioDrained() <-chan struct{}        { return c.q.audioDrained() }
func (c *conn) free() int                            { return c.q.free() }
func (c *conn) named(sessionID string)               { c.logp.Store(c.log().With("session", sessionID)) }
