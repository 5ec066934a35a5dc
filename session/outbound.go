package session

import (
	"sync"
	"time"

	"github.com/turnstile-gw/turnstile/protocol"
)

// send queues one event. A queue overflow closes the connection as too
// slow (4101): the client may reconnect and resume.
func (c *conn) send(v any) {
	b, err := protocol.Encode(v)
	if err != nil {
		c.log.Error("cannot encode event", "err", err)
		return
	}
	if !c.q.push(b) {
		c.tooSlow()
	}
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
	if n, ok := c.slowLog.Note(c.m.now(), 1); ok {
		c.log.Warn("browser too slow: send queue over its bound, closing", "bound_bytes", c.m.cfg.SendQueueBytes,
			"count", n)
	}
}

// reply queues an answer the browser asked for, built by build to fit
// budget bytes: first a share of the queue's free space, then less while
// other events take the space meanwhile. Such an answer never overflows the
// queue itself (4101 is left to a browser that does not read).
func (c *conn) reply(build func(budget int) any) {
	budget := min(c.m.cfg.SendQueueBytes/4, c.q.free())
	for range 4 {
		b, err := protocol.Encode(build(budget))
		if err != nil {
			c.log.Error("cannot encode event", "err", err)
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

// writer is the only goroutine writing to the browser. Each write is
// bounded by WriteTimeout through one reused timer that ends the
// connection when it fires, rather than a context per write.
func (c *conn) writer() {
	watchdog := time.AfterFunc(time.Hour, func() {
		c.out.setReason(protocol.DisconnectWriteFailed)
		c.cancel()
	})
	watchdog.Stop()
	defer watchdog.Stop()
	var spare []frame
	for {
		select {
		case <-c.q.notify:
			var ok bool
			if spare, ok = c.flush(watchdog, spare); !ok {
				c.cancel()
				return
			}
		case <-c.out.closing:
			if c.out.dropQueue() {
				c.q.drop()
			} else if _, ok := c.flush(watchdog, spare); !ok {
				c.cancel()
				return
			}
			c.closeBounded()
			c.cancel()
			return
		case <-c.ctx.Done():
			return
		}
	}
}

// flush writes everything queued; it returns the emptied slice for the
// next take, and false when a write failed.
func (c *conn) flush(watchdog *time.Timer, spare []frame) ([]frame, bool) {
	frames := c.q.take(spare)
	ok := true
	for i, f := range frames {
		if ok {
			watchdog.Reset(c.m.cfg.WriteTimeout)
			if err := c.wire.Write(f.binary, f.data); err != nil {
				c.out.setReason(protocol.DisconnectWriteFailed)
				ok = false
			} else if !f.received.IsZero() {
				c.relayOut.Observe(time.Since(f.received).Seconds())
			}
			watchdog.Stop()
		}
		c.q.written(f)
		frames[i] = frame{}
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
	case <-time.After(c.m.cfg.WriteTimeout):
		// Cancelling the connection's context closes the socket, which ends
		// the stuck close handshake.
		c.cancel()
		<-done
	}
}
