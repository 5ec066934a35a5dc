package session

import (
	"context"
	"time"

	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/transport"
)

// replace swaps the upstream for a resumed one (or a new one seeded with
// the history when there is no resumable handle): the old socket is closed
// first, microphone audio meanwhile is buffered, and the browser notices
// nothing.
func (v *voice) replace() bool {
	v.mu.Lock()
	v.swapping, v.wantSwap = true, false // from now on, microphone audio is buffered
	old, handle := v.up, v.handle
	v.mu.Unlock()
	_ = old.Close()
	delay := 100 * time.Millisecond
	for attempt := 0; attempt < 3; attempt++ {
		if v.ctx.Err() != nil {
			return false
		}
		up, err := v.c.connectLive(handle)
		if err != nil && handle != "" {
			v.c.log.Warn("voice: resume failed; opening a new upstream with the history", "err", err)
			handle = ""
			up, err = v.c.connectLive("")
		}
		if err == nil {
			v.mu.Lock()
			if v.closed {
				v.mu.Unlock()
				_ = up.Close()
				return false
			}
			v.up, v.swapping = up, false
			if handle == "" {
				v.handle = ""
			}
			n := v.bufBytes
			for _, b := range v.buffered {
				v.forwardLocked(up, b)
			}
			v.buffered, v.bufBytes = nil, 0
			v.mu.Unlock()
			v.c.log.Info("voice: upstream replaced", "resumed", handle != "", "buffered_bytes", n)
			return true
		}
		v.c.log.Warn("voice: upstream reconnect failed", "attempt", attempt+1, "err", err)
		select {
		case <-time.After(delay):
		case <-v.ctx.Done():
			return false
		}
		delay *= 2
	}
	return false
}

// lost gives up on the upstream: the browser is told, and closed with 4102
// so that it reconnects and resumes (the gateway then opens a new upstream).
func (v *voice) lost(why error) {
	v.c.log.Error("voice: upstream lost", "err", why)
	v.c.m.Metrics.UpstreamEvents.WithLabelValues("live", "error", closeCode(why)).Inc()
	v.c.send(protocol.NewError(protocol.CodeUpstreamLost, "the voice connection to the model could not be restored", true, 0))
	v.c.close(protocol.CloseUpstreamLost, "upstream lost: reconnect and resume", "upstream_lost")
}

// micAudio forwards browser audio upstream, buffers it while the upstream
// is replaced, and drops it while the session ends (barge-in lockout).
func (v *voice) micAudio(pcm []byte) {
	v.mu.Lock()
	switch {
	case v.ending || v.closed:
		v.mu.Unlock()
		return
	case v.swapping:
		for v.bufBytes+len(pcm) > micBufferMax && len(v.buffered) > 0 {
			v.bufBytes -= len(v.buffered[0])
			v.dropped += len(v.buffered[0])
			v.buffered = v.buffered[1:]
		}
		v.buffered = append(v.buffered, pcm)
		v.bufBytes += len(pcm)
		v.mu.Unlock()
		return
	}
	// Sent under the lock (SendAudio never blocks), so that a replacement
	// cannot close this upstream between choosing it and sending.
	defer v.mu.Unlock()
	v.forwardLocked(v.up, pcm)
}

// forwardLocked sends microphone audio upstream; v.mu is held.
func (v *voice) forwardLocked(up transport.LiveSession, pcm []byte) {
	if err := up.SendAudio(pcm); err != nil {
		v.dropped += len(pcm)
		if n := v.dropped; n == len(pcm) || n%(1<<20) < len(pcm) {
			v.c.log.Warn("voice: microphone audio dropped", "err", err, "dropped_bytes_total", n)
		}
	}
}

func (c *conn) connectLive(handle string) (transport.LiveSession, error) {
	c.mu.Lock()
	hist := append([]transport.Entry(nil), c.history...)
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(c.ctx, c.m.cfg.LiveConnectTimeout)
	defer cancel()
	up, err := c.m.Live.Connect(ctx, transport.LiveConfig{System: c.m.voiceSystem, Tools: c.m.voiceDecls,
		History: hist, ResumeHandle: handle})
	event := "connect"
	if handle != "" {
		event = "resume"
	}
	if err == nil {
		c.m.Metrics.UpstreamEvents.WithLabelValues("live", event, "none").Inc()
	}
	return up, err
}
