package session

import (
	"context"
	"time"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/protocol"
)

// A connection ended by its node rather than its browser: a drain. (A
// session taken over by another connection is the session's: takeOver,
// fence.go.)

// drain waits for the running turn (a voice turn plays out to its
// turnComplete) or ctx, then closes with 4100. A pinned connection (a phone
// call, which cannot reconnect elsewhere) is kept until it ends; GoodbyeLead
// before ctx's deadline the model is asked to say goodbye, and the
// connection closes when that answer is over.
func (c *conn) drain(ctx context.Context) {
	s := c.s.Load() // nil: session.start not read yet
	if c.id.Pinned {
		// No deadline, no goodbye before ctx ends (a nil channel). The
		// deadline is a context's: on the wall clock.
		var goodbye <-chan time.Time
		deadline, ok := ctx.Deadline()
		if ok {
			t := clock.Wall.NewTimer(max(clock.Wall.Until(deadline)-c.m.cfg.GoodbyeLead, 0))
			defer t.Stop()
			goodbye = t.C
		}
		select {
		case <-c.done.wait():
			return
		case <-ctx.Done():
		case <-goodbye:
			if v := s.voiceSide(); v != nil {
				c.log().Info("drain: asking the model to say goodbye before the deadline", "deadline", deadline)
				c.m.Metrics.Telephony(c.id.Channel, metrics.TelephonyDrainGoodbye)
				v.Notice(goodbyeNotice)
			}
		}
	}
	if s != nil {
		s.waitIdle(ctx)
	}
	c.close(protocol.DisconnectDraining)
}

// goodbyeNotice is what the model is told when a drain's deadline nears on
// a call.
const goodbyeNotice = "[The line is closing now for maintenance. Say one short sentence of goodbye to the " +
	"caller, asking them to call back, and nothing else.]"
