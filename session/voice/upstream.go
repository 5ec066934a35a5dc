package voice

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/fdroom"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/tracing"
	"github.com/turnstile-gw/turnstile/transport"
)

// connect opens an upstream, resuming handle when it is not "". A handle
// that cannot be resumed gives a new upstream seeded with the history;
// resumed says which it was. Each dial takes a place in the connect budget
// first; a refusal is ErrConnectRefused. A node with no file descriptor
// left for it refuses it with fdroom.ErrFull.
func (v *Session) connect(handle string, reason metrics.ConnectReason) (up transport.LiveSession, resumed bool, err error) {
	if handle != "" {
		up, err = v.dial(handle, reason)
		if err == nil || errors.Is(err, ErrConnectRefused) || errors.Is(err, fdroom.ErrFull) {
			return up, err == nil, err
		}
		v.d.Log.Warn("voice: could not resume the upstream session; starting a new one", "err", err)
	}
	up, err = v.dial("", reason)
	return up, false, err
}

func (v *Session) dial(handle string, reason metrics.ConnectReason) (transport.LiveSession, error) {
	if v.d.Budget != nil && !v.d.Budget.AllowConnect(reason) {
		v.d.Metrics.UpstreamConnect(reason, metrics.ConnectRefused)
		return nil, ErrConnectRefused
	}
	ctx, cancel := context.WithTimeout(v.ctx, v.cfg.ConnectTimeout)
	defer cancel()
	var hist []transport.Entry
	if handle == "" {
		hist = v.h.History()
	}
	up, err := v.d.Live.Connect(ctx, transport.LiveConfig{System: v.cfg.System, Tools: v.cfg.Tools,
		History: hist, ResumeHandle: handle, Voice: v.cfg.Voice, LanguageCode: v.cfg.LanguageCode,
		Affinity: v.cfg.Affinity})
	event := metrics.LiveConnect
	if handle != "" {
		event = metrics.LiveResume
	}
	if errors.Is(err, fdroom.ErrFull) {
		v.d.Metrics.UpstreamConnect(reason, metrics.ConnectRefused)
		return nil, err
	}
	if err != nil {
		v.d.Metrics.UpstreamConnect(reason, metrics.ConnectFailed)
		v.d.Metrics.Upstream(metrics.LiveError, closeCode(err))
		return nil, err
	}
	v.d.Metrics.UpstreamConnect(reason, metrics.ConnectOpened)
	v.d.Metrics.Upstream(event, metrics.UpstreamCodeNone)
	return up, nil
}

// replace swaps the old upstream for a resumed one (or a new one seeded
// with the history when there is no resumable handle): the old socket is
// closed first, microphone audio meanwhile is buffered, and the browser
// notices nothing. reason is go_away or reconnect. It returns nil when the
// upstream was replaced, ErrConnectRefused when the connect budget refused
// it (no further attempt is made), else the last attempt's error.
func (v *Session) replace(old transport.LiveSession, reason metrics.ConnectReason) error {
	v.mu.Lock()
	v.swapping, v.wantSwap = true, false // from now on, microphone audio is buffered
	handle := v.handle
	v.mu.Unlock()
	_ = old.Close()
	delay := v.cfg.ReconnectDelay
	var last error
	for attempt := 1; attempt <= v.cfg.ReconnectAttempts; attempt++ {
		if v.ctx.Err() != nil {
			return v.ctx.Err()
		}
		up, resumed, err := v.connect(handle, reason)
		if errors.Is(err, ErrConnectRefused) {
			return err
		}
		if err == nil {
			v.mu.Lock()
			if v.closed {
				v.mu.Unlock()
				_ = up.Close()
				return errClosed
			}
			v.up, v.upFast = up, sendsNeverWait(up)
			if !resumed {
				v.handle = ""
			}
			// The buffered audio goes out before the microphone's next
			// chunk: Mic waits for this lock, then sees swapping false.
			n := v.bufBytes
			for _, b := range v.buffered {
				if err := up.SendAudio(b); err != nil {
					break
				}
			}
			v.buffered, v.bufBytes, v.swapping = nil, 0, false
			deferred := v.deferred
			v.deferred = nil
			v.traceEventLocked(tracing.EventResumed, attribute.Bool("turnstile.voice.resumed", resumed))
			v.mu.Unlock()
			for _, u := range deferred {
				v.sendUserTurn(u)
			}
			v.d.Log.Info("voice: upstream replaced", "resumed", resumed, "buffered_bytes", n)
			return nil
		}
		last = err
		v.d.Log.Warn("voice: upstream reconnect failed", "attempt", attempt, "err", err)
		select {
		case <-clock.Wall.After(delay):
		case <-v.ctx.Done():
			return v.ctx.Err()
		}
		delay *= 2
	}
	return last
}

// errClosed: the voice side was closed while its upstream was replaced.
var errClosed = errors.New("voice: closed")
