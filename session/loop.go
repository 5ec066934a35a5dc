package session

import (
	"github.com/turnstile-gw/turnstile/internal/clock"
)

// A voice session on an event loop (Manager.Loops; internal/evloop, Linux).
//
// Once the browser's microphone streams, its socket (TCP, under TLS or not) leaves Go's
// poller for the event loop that serves the session's model connection
// (the same key, affinity), for the rest of the connection. There, a
// microphone frame is handled where the loop read it (fastMic) while the
// reader waits between messages: it is checked and sent up as the reader
// would (micAudio), with no goroutine woken for it — as is model audio,
// sent down from the upstream's loop (voice's audioSink) without waking the
// pump. Everything else (text messages, pings, the close) still goes to
// the reader, in order. Writes to the browser never wait: what the socket
// does not take is kept, up to the send queue's bound, past which the
// browser is closed as too slow (4101) as a full queue closes it.
//
// A frame is handled on the loop only when nothing on its way waits for
// the network: the upstream is served by the loop too, or microphone audio
// is being buffered for a new one (voice's MicWontWait). Otherwise the
// reader handles it.

// onLoop has the browser's socket served by an event loop when the
// manager has them and the session's upstream is on one (through an https
// proxy it is not: the browser's socket on a loop would then only hand
// each microphone frame to the reader, a hop more than its own read); it
// reports whether it is. The socket moves over plain TCP or the gateway's
// own TLS (wsbuf.TLSListener), not over TLS another listener made. It is
// decided once, at a microphone frame.
func (c *conn) onLoop(w *browserWire) bool {
	if c.loopTried {
		return c.looped
	}
	if c.m.Loops == nil {
		return false
	}
	v := c.s.Load().voiceSide()
	if v == nil {
		return false
	}
	upOnLoop, known := v.UpstreamOnLoop()
	if !known {
		return false // asked again at the next frame
	}
	c.loopTried = true
	if !upOnLoop {
		return false
	}
	if err := w.ws.Attach(c.m.Loops.Loop(c.loopKey), c.m.cfg.SendQueueBytes); err != nil {
		c.log().Debug("browser socket not moved to an event loop", "err", err)
		return false
	}
	w.ws.SetFast(c.fastMic)
	c.looped = true
	return true
}

// fastMic is the browser socket's fast path (wsbuf.FastFunc): a
// microphone frame, handled on the loop as readLoop would handle it. The
// reader waits meanwhile, so its own state is this call's.
func (c *conn) fastMic(binary bool, pcm []byte) bool {
	s := c.s.Load()
	if !binary || s == nil {
		return false
	}
	v := s.voiceSide()
	if v == nil || !v.MicWontWait() {
		return false
	}
	now := clock.Wall.Now()
	c.sighted(now, &c.seen, aliveGrain(c.m.cfg.IdleTimeout))
	c.relay.audioIn.Inc()
	c.micAudio(s, now, pcm)
	return true
}

// audioWontWait is outbound's: the browser's socket is on an event loop,
// whose writes never wait.
func (c *conn) audioWontWait() bool {
	w, ok := c.wire.(*browserWire)
	return ok && w.ws.OnLoop()
}

// affinity is outbound's: the connection's event-loop key.
func (c *conn) affinity() uint64 { return c.loopKey }
