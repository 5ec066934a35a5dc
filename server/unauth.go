package server

// Connections on the public listener, and the unauthenticated ones among
// them (issue 24, finding 3): a connection is unauthenticated from accept
// until a WebSocket upgrade takes it over, which happens only after its
// token (or a carrier's signature) was verified. Until then it is a page
// load, a health check, a refused upgrade — or an idler holding a slot.
// Those are capped per client and together at a share of the node's
// connections, so that idlers can never take the slots of the users who
// authenticate; and they are closed after a short idle time.

import (
	"container/list"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/fdroom"
	"github.com/turnstile-gw/turnstile/metrics"
)

// Timings of the unauthenticated-connection limits (the caps' defaults are
// the gateway's settings: TURNSTILE_UNAUTH_PER_IP, TURNSTILE_UNAUTH_SHARE).
const (
	// DefaultUnauthIdleTimeout closes an unauthenticated keep-alive
	// connection with no request: a browser that loaded the page has what
	// it needs and opens a new connection for the WebSocket.
	DefaultUnauthIdleTimeout = 10 * time.Second
	// unauthGrace is how long a new connection that has sent no complete
	// request yet is safe from eviction: a real client sends its request
	// at once; one silent for longer is a stalled or idle client.
	unauthGrace = time.Second
	// retryAfterUnauth: a client's own connections free as its requests
	// end or idle out.
	retryAfterUnauth = 2 * time.Second
)

// connTable counts the public listener's open connections and keeps the
// unauthenticated ones in the order they were last busy, the longest idle
// first: the one closed to make room.
type connTable struct {
	// files counts the open connections, as descriptors shared with the
	// voice sessions' model connections, and bounds them at
	// MaxConnections (fdroom.TakeConn): the one count of both caps.
	files   *fdroom.Room
	share   int           // unauthenticated connections together; 0: no cap
	perIP   int           // unauthenticated connections of one client; 0: no cap
	idle    time.Duration // an unauthenticated direct connection idle this long is closed; 0: never
	proxies TrustedProxies
	now     func() time.Time
	// refused counts and logs a refusal (reason, the client).
	refused func(reason metrics.RefusalReason, client string)

	mu     sync.Mutex
	unauth list.List             // *tracked, longest idle first
	byIP   map[string]*list.List // client key → its unauthenticated *tracked, longest idle first
}

func newConnTable(cfg Config, files *fdroom.Room, devMode bool, refused func(reason metrics.RefusalReason, client string)) *connTable {
	if files == nil {
		files = fdroom.New(0).WithConns(cfg.MaxConnections)
	}
	t := &connTable{files: files, perIP: cfg.UnauthPerIP, idle: cfg.UnauthIdleTimeout,
		proxies: cfg.TrustedProxies, now: clock.Wall.Now, refused: refused, byIP: map[string]*list.List{}}
	if cfg.MaxConnections > 0 && cfg.UnauthShare > 0 && cfg.UnauthShare < 1 {
		t.share = max(1, int(float64(cfg.MaxConnections)*cfg.UnauthShare))
	}
	// In dev mode every client is this machine (the listener is loopback).
	if devMode {
		t.perIP = 0
	}
	return t
}

// connection states, as far as eviction cares.
const (
	stateNew    = iota // accepted, no complete request yet
	stateActive        // serving a request
	stateIdle          // between requests of a keep-alive connection
)

// tracked is one open connection of the public listener.
type tracked struct {
	net.Conn
	t       *connTable
	proxied bool      // from a trusted proxy: its client is known per request
	key     string    // the client (clientKey); "" not known yet (a proxy's, before a request)
	since   time.Time // accepted

	// Under t.mu:
	state   int
	counted bool          // holding a connection's descriptor of t.files
	elem    *list.Element // in t.unauth; nil once authenticated or gone
	ipElem  *list.Element // in t.byIP[key]; nil when not keyed
	timer   *time.Timer   // the idle timeout
	gen     uint64        // bumped at each state change: a stale idle timer does nothing
}

// Close closes the connection and gives its place back, however often it
// is called (the HTTP server and a hijacking WebSocket may both close it).
func (c *tracked) Close() error {
	err := c.Conn.Close()
	c.t.release(c)
	return err
}

// Unwrap is the connection under the tracking (wsbuf.Unwrapper): bytes
// pass through unchanged, so a WebSocket may read and write it directly.
func (c *tracked) Unwrap() net.Conn { return c.Conn }

// clientKey is what the per-client cap counts by: an IPv4 address, or an
// IPv6 /64 (what one subscriber is given).
func clientKey(a netip.Addr) string {
	a = a.Unmap()
	if a.Is6() {
		return netip.PrefixFrom(a, 64).Masked().String()
	}
	return a.String()
}

// admit takes c into the table, or refuses it (nil: c is closed). When the
// client or the unauthenticated share is full, the connection idle the
// longest of that client, or of all, is closed to make room; when none is
// idle the new one is refused.
func (t *connTable) admit(c net.Conn) *tracked {
	tc := &tracked{Conn: c, t: t, since: t.now()}
	if peer, ok := addrOf(c.RemoteAddr().String()); ok {
		if tc.proxied = t.proxies.trusts(peer); !tc.proxied {
			tc.key = clientKey(peer)
		}
	}
	t.mu.Lock()
	if t.files.ConnsFull() {
		t.mu.Unlock()
		// At accept there are no headers yet: the client is the TCP peer.
		t.refuse(c, metrics.RefusedMaxConnections, c.RemoteAddr().String())
		return nil
	}
	victim, reason := t.makeRoom(tc, tc.key)
	if reason != "" && victim == nil {
		t.mu.Unlock()
		t.refuse(c, reason, tc.client())
		return nil
	}
	// A victim's descriptor passes to the newcomer (it is closed below).
	if victim == nil && !t.files.TakeConn() {
		t.mu.Unlock()
		// Voice sessions' model connections hold the rest.
		t.refuse(c, metrics.RefusedMaxConnections, c.RemoteAddr().String())
		return nil
	}
	tc.counted = true
	tc.elem = t.unauth.PushBack(tc)
	t.setKey(tc, tc.key)
	t.mu.Unlock()
	t.evict(victim, reason)
	return tc
}

// makeRoom finds the connection to close so that tc may hold a place as
// key's: reason is "" when there is room, else the limit that is full,
// with the victim (already out of the table) or nil when none may go.
// Under t.mu.
func (t *connTable) makeRoom(tc *tracked, key string) (victim *tracked, reason metrics.RefusalReason) {
	switch {
	case key != "" && t.perIP > 0 && t.ipLen(key, tc) >= t.perIP:
		reason, victim = metrics.RefusedUnauthPerIP, t.longestIdle(t.byIP[key], tc)
	case tc.elem == nil && t.share > 0 && t.unauth.Len() >= t.share:
		reason, victim = metrics.RefusedUnauthShare, t.longestIdle(&t.unauth, tc)
	}
	if victim != nil {
		t.leave(victim)
		// Its place (its descriptor) passes at once to the newcomer, in
		// admit.
		victim.counted = false
	}
	return victim, reason
}

// ipLen is how many unauthenticated connections key holds besides tc.
func (t *connTable) ipLen(key string, tc *tracked) int {
	l := t.byIP[key]
	if l == nil {
		return 0
	}
	if tc.ipElem != nil && tc.key == key {
		return l.Len() - 1
	}
	return l.Len()
}

// longestIdle is the first connection of l that may be closed: not
// serving a request, and past its first request or silent since accept
// for unauthGrace. Under t.mu.
func (t *connTable) longestIdle(l *list.List, but *tracked) *tracked {
	if l == nil {
		return nil
	}
	now := t.now()
	for e := l.Front(); e != nil; e = e.Next() {
		c := e.Value.(*tracked)
		switch {
		case c == but, c.state == stateActive:
		case c.state == stateNew && now.Sub(c.since) < unauthGrace:
		default:
			return c
		}
	}
	return nil
}

// setKey files tc under key (moving it from the key it had). Under t.mu.
func (t *connTable) setKey(tc *tracked, key string) {
	t.unfile(tc)
	tc.key = key
	if key == "" || t.perIP <= 0 || tc.elem == nil {
		return
	}
	l := t.byIP[key]
	if l == nil {
		l = list.New()
		t.byIP[key] = l
	}
	tc.ipElem = l.PushBack(tc)
}

// unfile takes tc out of its client's list (its key stays, for the log).
// Under t.mu.
func (t *connTable) unfile(tc *tracked) {
	if tc.ipElem == nil {
		return
	}
	if l := t.byIP[tc.key]; l != nil {
		l.Remove(tc.ipElem)
		if l.Len() == 0 {
			delete(t.byIP, tc.key)
		}
	}
	tc.ipElem = nil
}

// leave takes tc out of the unauthenticated connections (authenticated,
// evicted or closed); once out, nothing changes its key. Under t.mu.
func (t *connTable) leave(tc *tracked) {
	if tc.elem != nil {
		t.unauth.Remove(tc.elem)
		tc.elem = nil
	}
	t.unfile(tc)
	tc.gen++
	if tc.timer != nil {
		tc.timer.Stop()
		tc.timer = nil
	}
}

// release gives tc's place back; idempotent.
func (t *connTable) release(tc *tracked) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.leave(tc)
	if tc.counted {
		tc.counted = false
		t.files.GiveConn()
	}
}

// evict closes a connection makeRoom chose, counting it under reason.
func (t *connTable) evict(victim *tracked, reason metrics.RefusalReason) {
	if victim == nil {
		return
	}
	t.refused(reason, victim.client())
	_ = victim.Close()
}

// refuse closes a connection just accepted (a reset: nothing of it stays
// in TIME_WAIT here), counting it under reason. At accept there is no
// request to answer, and with TLS not even a way to write one.
func (t *connTable) refuse(c net.Conn, reason metrics.RefusalReason, client string) {
	// Counted before the reset, so that whoever sees the reset also sees
	// the refusal in the metrics.
	t.refused(reason, client)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// client names tc's client for a log line.
func (c *tracked) client() string {
	if c.key != "" {
		return c.key
	}
	return c.RemoteAddr().String()
}

// full reports whether every connection slot is taken.
func (t *connTable) full() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.files.ConnsFull() || t.files.Full()
}
