package session

import (
	"sync"
	"time"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/protocol"
)

// Idle connections are found by one goroutine per node, not one per
// connection: while the node has connections, every PingInterval it closes
// those that sent nothing and answered no ping for IdleTimeout (4104), and
// sends the others a WebSocket ping. The library's Ping waits for the pong,
// so each ping is sent from a goroutine of its own that lives one round
// trip (for a dead peer, until it is reaped); a connection has at most one
// ping out. Any frame from the browser, or a pong, counts as a sign of
// life.
//
// The connections are taken in pingSlots groups, one group every
// PingInterval/pingSlots, so that each is still checked and pinged once
// per PingInterval but not all at the same moment: the runtime keeps a
// goroutine's record (about 0.4 KiB) for good once it has existed, so a
// node that pinged its 20 000 idle sessions at once would keep 20 000
// records more than it has goroutines, and the pings' garbage would come
// in one burst that the collector's headroom must hold.

// startKeepaliveLocked starts the keepalive goroutine if it is needed and
// not running; m.mu is held.
func (m *Manager) startKeepaliveLocked() {
	every := m.cfg.PingInterval
	if every <= 0 {
		every = m.cfg.IdleTimeout / 4
	}
	if every <= 0 || m.pinger != nil {
		return
	}
	m.pinger = make(chan struct{})
	m.wg.Add(1)
	go m.keepalive(m.pinger, every)
}

// pingSlots is how many groups the keepalive takes the connections in.
const pingSlots = 16

// keepalive runs until stop is closed (the node has no connection left).
// A connection joins the group after the last one given out, and its
// group comes round once per every.
func (m *Manager) keepalive(stop <-chan struct{}, every time.Duration) {
	defer m.wg.Done()
	t := clock.Wall.NewTicker(max(every/pingSlots, time.Millisecond))
	defer t.Stop()
	var conns []*conn
	var turn, next uint8 // the group whose turn it is; the group given out next
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			m.mu.Lock()
			conns = conns[:0]
			for c := range m.all {
				if !c.pings.placed {
					c.pings.placed, c.pings.slot, next = true, next, (next+1)%pingSlots
				}
				if c.pings.slot == turn {
					conns = append(conns, c)
				}
			}
			m.mu.Unlock()
			turn = (turn + 1) % pingSlots
			for _, c := range conns {
				c.keepalive(now)
			}
			clear(conns)
		}
	}
}

// keepalive reaps the connection when it has been idle too long, else
// pings it (unless a ping is still out).
func (c *conn) keepalive(now time.Time) {
	if s := c.s.Load(); s == nil || !s.started.Load() || c.closing() {
		return // before session.start the handshake timeout applies
	}
	if idle := c.m.cfg.IdleTimeout; idle > 0 && idleSince(now, c.lastSeen.Load(), idle) {
		if c.out.close(protocol.DisconnectIdle, false) {
			c.refused(limitIdle, now)
		}
		return
	}
	if c.m.cfg.PingInterval <= 0 {
		return
	}
	c.pings.start(func() {
		// Ends with the pong, or with the connection (its context).
		if c.wire.Ping(c.ctx) == nil {
			c.alive(clock.Wall.Now())
		}
	})
}

// pinger runs at most one WebSocket ping at a time, each in a goroutine of
// its own, and none once stopped. The keepalive goroutine starts them and
// the connection's end stops them; it locks.
type pinger struct {
	// The keepalive goroutine's own, under m.mu: the connection's group.
	placed bool
	slot   uint8

	mu      sync.Mutex
	out     bool // a ping is out
	stopped bool // the connection is ending: no more pings
	wg      sync.WaitGroup
}

// start runs ping unless one is out or the pinger is stopped.
func (p *pinger) start(ping func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.out || p.stopped {
		return
	}
	p.out = true
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		ping()
		p.mu.Lock()
		p.out = false
		p.mu.Unlock()
	}()
}

// stop starts no more pings and waits for the one out.
func (p *pinger) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.wg.Wait()
}

// alive records a sign of life from the browser.
func (c *conn) alive(now time.Time) { c.lastSeen.Store(now.UnixNano()) }

// aliveGrain is how far apart, in nanoseconds, the reader records the
// frames of a browser that keeps sending (sighted): a frame within it of
// the last one recorded is not recorded again — with a 90 s idle timeout
// one store in about 70 frames of a voice stream rather than one a frame,
// each an atomic store to a line of the connection that the keepalive
// goroutine reads. idleSince allows for it.
func aliveGrain(idle time.Duration) int64 { return int64(idle / 64) }

// sighted is alive for the reader's frames: recorded when at least
// aliveGrain(IdleTimeout) after the last one the reader recorded (seen,
// the reader's own), or before it (a clock stepped back).
func (c *conn) sighted(now time.Time, seen *int64, grain int64) {
	if ns := now.UnixNano(); ns-*seen >= grain || ns < *seen {
		c.lastSeen.Store(ns)
		*seen = ns
	}
}

// idleSince reports whether a connection whose last recorded sign of life
// is last (unix ns) has been idle for idle at now. The frames the reader
// did not record came less than aliveGrain after the one it did, so the
// connection counts as idle only a grain later: never before idle has
// passed since its last frame, at most a grain after (it is checked once a
// ping interval, which is longer).
func idleSince(now time.Time, last int64, idle time.Duration) bool {
	return now.Sub(time.Unix(0, last)) >= idle+time.Duration(aliveGrain(idle))
}
