package session

import (
	"context"
	"time"

	"github.com/coder/websocket"
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

func (c *conn) tooSlow() {
	c.log.Warn("browser too slow: send queue over its bound, closing", "bound_bytes", c.m.cfg.SendQueueBytes)
	c.mu.Lock()
	c.closeNow = true
	c.mu.Unlock()
	c.close(protocol.CloseTooSlow, "too slow: reconnect and resume", "too_slow")
}

// close asks the writer to flush what is queued and close with code. The
// first call wins.
func (c *conn) close(code int, reason, metricReason string) {
	c.closeOnce.Do(func() {
		c.setReason(metricReason)
		c.closeCode, c.closeReason = websocket.StatusCode(code), protocol.CloseReason(reason)
		close(c.closing)
	})
}

// writer is the only goroutine writing to the browser.
func (c *conn) writer() {
	for {
		select {
		case <-c.q.notify:
			if !c.flush() {
				c.cancel()
				return
			}
		case <-c.closing:
			c.mu.Lock()
			now := c.closeNow
			c.mu.Unlock()
			if now {
				c.q.drop()
			} else if !c.flush() {
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

// closeBounded sends the close frame and waits for the browser's answer
// (which the reader receives), but no longer than the write timeout: a
// client too slow to read its socket cannot even take the close frame.
// (CloseNow cannot interrupt a Close in progress.)
func (c *conn) closeBounded() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.ws.Close(c.closeCode, c.closeReason)
	}()
	select {
	case <-done:
	case <-time.After(c.m.cfg.WriteTimeout):
		// Cancelling the reader's context makes the library drop the TCP
		// connection, which ends the stuck close handshake.
		c.cancel()
		<-done
	}
}

func (c *conn) flush() bool {
	for _, f := range c.q.take() {
		typ := websocket.MessageText
		if f.binary {
			typ = websocket.MessageBinary
		}
		ctx, cancel := context.WithTimeout(c.ctx, c.m.cfg.WriteTimeout)
		err := c.ws.Write(ctx, typ, f.data)
		cancel()
		if err != nil {
			c.setReason("write_failed")
			return false
		}
	}
	return true
}
