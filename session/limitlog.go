package session

import "github.com/turnstile-gw/turnstile/internal/throttle"

// connLogs throttle a connection's own log lines: one a minute per limit
// refused, and one for "browser too slow". Most sessions never write one,
// and an idle session should not carry them (800 bytes, a third of the
// connection's struct): they are made the first time one is needed.
type connLogs struct {
	limits [numLimits]throttle.Log
	slow   throttle.Log
}

// throttles returns the connection's log throttles, making them the first
// time; safe from any of the connection's goroutines.
func (c *conn) throttles() *connLogs {
	if l := c.logs.Load(); l != nil {
		return l
	}
	c.logs.CompareAndSwap(nil, new(connLogs))
	return c.logs.Load()
}
