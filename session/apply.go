package session

import (
	"context"
	"time"

	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/store"
)

// applyIntents applies what a turn's tools asked for, at the end of the
// tool round that produced them (DESIGN §6). Tools never touch sessions:
// this is the only place their intents take effect. v is the voice side in
// voice mode, nil in text mode.
func (c *conn) applyIntents(turn int, ins []intents.Intent, v *voice) {
	for _, in := range ins {
		applied := true
		switch in.Type {
		case intents.BlockUser:
			c.block(in)
		case intents.SetPendingMessage:
			c.mu.Lock()
			c.rec.PendingMessage = in.Message
			c.mu.Unlock()
		case intents.StartVoiceSession:
			switch {
			case v != nil:
				applied = false // already in voice
			case c.m.Live == nil:
				applied = false
				c.send(protocol.NewError(protocol.CodeUnsupported,
					"voice is not available on this gateway; the conversation stays in text", false, turn))
			default:
				// The switch happens when this text turn ends.
				c.mu.Lock()
				c.voiceAfterTurn = true
				c.mu.Unlock()
			}
		case intents.EndVoiceSession, intents.SuppressAudio, intents.SuppressTranscript:
			if v == nil {
				applied = false // voice-only: a text turn has no audio or transcript
				break
			}
			v.apply(in.Type)
		}
		if applied {
			c.m.Metrics.IntentsApplied.WithLabelValues(string(in.Type)).Inc()
			c.log.Info("intent applied", "turn", turn, "intent", in.Type)
		} else {
			c.log.Info("intent not applicable in this mode", "turn", turn, "intent", in.Type, "mode", c.mode())
		}
	}
}

// block applies BLOCK_USER: the user's input is refused on every session
// and node until the block ends, and new connections are refused (4003).
func (c *conn) block(in intents.Intent) {
	b := store.Block{Until: time.Now().Add(in.Duration).UTC().Truncate(time.Second), Reason: in.Reason}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), c.m.cfg.StoreTimeout)
	defer cancel()
	if err := c.m.Store.BlockUser(ctx, c.user, b); err != nil {
		// The block still holds on this node's connections of the user.
		c.log.Error("could not store a user block; it holds on this node only", "err", err)
	}
	c.log.Warn("user blocked", "user", c.user, "until", b.Until, "reason", b.Reason)
	c.m.blockLocal(c.user, b)
}

// setBlocked records a block on this connection and tells the browser.
func (c *conn) setBlocked(b store.Block) {
	c.mu.Lock()
	if !b.Until.After(c.blockedUntil) {
		c.mu.Unlock()
		return
	}
	c.blockedUntil = b.Until
	c.mu.Unlock()
	c.send(protocol.Blocked{Type: protocol.TypeBlocked, Until: b.Until.Format(time.RFC3339), Reason: b.Reason})
}

// blocked reports whether input is refused now.
func (c *conn) blocked() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.blockedUntil, time.Now().Before(c.blockedUntil)
}

func (c *conn) mode() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rec.Mode
}
