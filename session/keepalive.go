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
	if idle := c.m.cfg.IdleTimeout; idle > 0 && now.Sub(time.Unix(0, c.lastSeen.Load())) >= idle {
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
