package session

import (
	"errors"
	"sync"
	"time"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/evloop"
	"github.com/turnstile-gw/turnstile/internal/stages"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/session/voice"
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
		c.tooSlow(0)
	}
}

// sendNow is send for a text turn's events: when nothing is queued and no
// writer runs, the turn's goroutine writes the frame itself, as the
// writer would (one at a time, under the watchdog), rather than wake a
// writer goroutine for it — one hand-off fewer before the browser sees a
// turn's first words. Order is kept: what others queue meanwhile waits
// for a writer started after this write. A browser that does not read
// holds the turn no longer than the model's audio would be held
// (directLimit): the write is then cut and the browser closed as too slow
// (4101: reconnect and resume), as a direct write of model audio is, rather
// than held to WriteTimeout and dropped as a failed write.
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
	c.writeClaimed(frame{data: b}, true)
}

// sendAudio sends model audio; false when the browser is too slow (and is
// being closed). A received time that is not zero is timed to the frame's
// write (turnstile_relay_added_seconds, out).
//
// When nothing is queued and no writer runs — the usual case while audio
// streams, a frame every 20 ms or more — the caller (the voice pump)
// writes the frame itself, from pcm, with no copy and no writer goroutine
// woken for it. Else a copy is queued behind what is there, as is what
// others queue while the pump writes. The pump writing directly does not
// read the upstream meanwhile, so a browser that stops reading does not
// overflow the queue: the watchdog cuts a direct write once it has run for
// as long as the queue's bound holds of model audio at its real-time rate
// (no longer than WriteTimeout), and the browser is closed as too slow
// (4101), as it would have been had the frames been queued.
func (c *conn) sendAudio(pcm []byte, received time.Time) bool {
	if c.q.claim(len(pcm)) {
		if c.audioWontWait() {
			c.relay.loop.Inc()
		} else {
			c.relay.direct.Inc()
		}
		return c.writeClaimed(frame{data: pcm, binary: true, received: received}, true)
	}
	c.relay.queued.Inc()
	if !c.q.pushAudio(pcm, received) {
		c.tooSlow(0)
		return false
	}
	return true
}

// directLimit is how long a direct write (the pump's own of model audio, a
// text turn's of its event) may take:
// as long as the send queue's bound holds of model audio at its real-time
// rate (a browser slower than that would have overflowed it), and no
// longer than WriteTimeout.
func (c *conn) directLimit() time.Duration {
	return min(c.m.cfg.WriteTimeout, time.Duration(c.m.cfg.SendQueueBytes)*time.Second/voice.ModelAudioBytesPerSecond)
}

// writeClaimed writes f on the caller's goroutine, which has claimed the
// writer's place (queue.claim), and gives the place back (to a writer for
// what was queued meanwhile); it reports whether the write went out. A
// slow write is cut as too slow after directLimit (writeFrame). A failed
// write ends the connection as the writer's does.
func (c *conn) writeClaimed(f frame, slow bool) bool {
	if c.ctx.Err() != nil {
		c.writerEnded()
		return false
	}
	c.armWatchdog()
	if !c.writeFrame(f, slow) {
		c.cancel()
		c.writerEnded()
		return false
	}
	c.q.release()
	return true
}

// tooSlow closes the connection as too slow (4101): its send queue
// overflowed, or (stuck above zero) a direct write (the pump's of model
// audio, a text turn's of its event) ran for as long as the queue's bound
// holds of model audio.
func (c *conn) tooSlow(stuck time.Duration) {
	if !c.out.closeNow(protocol.DisconnectTooSlow) {
		return
	}
	if n, ok := c.refusals.tooSlow(c.m.now()); ok {
		if stuck > 0 {
			c.log().Warn("browser too slow: a direct write stuck for as long as the send queue holds of audio, closing",
				"stuck", stuck, "bound_bytes", c.m.cfg.SendQueueBytes, "count", n)
			return
		}
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
	closing latch  // closed when a close is decided
	onClose func() // called once a close is decided: asks the writer to close

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
		o.closing.close()
		won = true
	})
	if won && o.onClose != nil {
		o.onClose()
	}
	return won
}

func (o *closer) closeNow(d protocol.Disconnect) bool { return o.close(d, true) }

// decided reports whether a close has been decided.
func (o *closer) decided() bool { return o.closing.isClosed() }

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
		c.watchdog = newWatchdog(c.m.cfg.WriteTimeout, c.directLimit(), func(slow bool) {
			if slow {
				c.tooSlow(c.directLimit())
			} else {
				c.out.setReason(protocol.DisconnectWriteFailed)
			}
			c.cancel()
		})
	}
}

// shedWriter drops what the writer keeps from one write to the next — its
// watchdog with the watchdog's timer (stopped: no write is in progress),
// and the queue's two frame slices, about 0.3 KiB — when no writer runs
// and nothing is queued; the next write makes them again. The
// reader calls it when the browser has gone idle (a pong with nothing
// behind it, at most once a ping interval: serve), so that a session left
// open holds none of it; a connection that streams audio never goes idle
// that way, and keeps them.
func (c *conn) shedWriter() {
	q := c.q
	q.mu.Lock()
	defer q.mu.Unlock()
	// A writer starts, and a claim is made, only under q.mu with writing
	// set: while it is not, nothing touches the writer's parts.
	if q.writing || len(q.frames) > 0 {
		return
	}
	if w := c.watchdog; w != nil {
		// A timer that fires meanwhile finds no write in progress and
		// goes quiet (check).
		w.stop()
		c.watchdog = nil
	}
	q.frames, c.spare = nil, nil
}

// writerEnded stops the writer for good (a close was sent, a write
// failed, or the connection ended) and tells run.
func (c *conn) writerEnded() {
	if c.watchdog != nil {
		c.watchdog.stop()
	}
	c.q.endWriter()
	c.wend.close()
}

// flush writes frames; it returns the emptied slice for the next take,
// and false when a write failed.
func (c *conn) flush(frames []frame) (_ []frame, ok bool) {
	ok = true
	for i, f := range frames {
		if ok {
			ok = c.writeFrame(f, false)
		}
		c.q.written(f)
		frames[i] = frame{}
	}
	if cap(frames) > keptFrames {
		return nil, ok // grown by a backlog: not kept
	}
	return frames[:0], ok
}

// writeFrame writes one frame under the watchdog: cut as failed after
// WriteTimeout, or if slow as too slow after directLimit. It reports false
// when the write failed.
func (c *conn) writeFrame(f frame, slow bool) bool {
	if slow {
		c.watchdog.beginSlow()
	} else {
		c.watchdog.begin()
	}
	defer c.watchdog.end()
	if err := c.wire.Write(f.binary, f.data); err != nil {
		if errors.Is(err, evloop.ErrBacklog) {
			c.tooSlow(0) // on an event loop, the socket's backlog is the send queue's bound
		}
		c.out.setReason(protocol.DisconnectWriteFailed)
		return false
	}
	if stages.Wrote(); !f.received.IsZero() {
		c.relay.written(f.received)
	}
	return true
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
func (c *conn) ended() <-chan struct{}               { return c.done.wait() }
func (c *conn) dropAudio()                           { c.q.dropAudio() }
func (c *conn) audioDrained() <-chan struct{}        { return c.q.audioDrained() }
func (c *conn) free() int                            { return c.q.free() }
func (c *conn) named(sessionID string) {
	c.logp.Store(connLogger(c.m.Log, c.id.ClientIP, sessionID))
}
