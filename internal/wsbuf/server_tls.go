package wsbuf

import (
	"crypto/tls"
	"net"

	"github.com/turnstile-gw/turnstile/internal/evloop"
)

// A browser's WebSocket over the server's own TLS on an event loop: the
// listener makes each connection's tls.Conn over a feed (loop_tls.go), so
// that a ServerConn accepted on it can move to a loop with its TLS
// (Attach), as a wss:// Client does.

// TLSListener is tls.NewListener's listener (cfg must have a certificate,
// or GetCertificate or GetConfigForClient), each accepted connection's
// tls.Conn made over a feed: a ServerConn accepted on it (Accept) can move
// to an event loop (Attach) with its TLS. Off a loop the feed passes
// bytes through, following TLS's record boundaries on the way.
func TLSListener(ln net.Listener, cfg *tls.Config) net.Listener {
	return &tlsListener{Listener: ln, cfg: cfg}
}

type tlsListener struct {
	net.Listener
	cfg *tls.Config
}

func (l *tlsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return tls.Server(&tlsFeed{Conn: c, unsure: true}, l.cfg), nil
}

// Unwrap is the connection under the feed (the listener's, until the
// connection moves to a loop): a wrapper's accounting finds its own
// through a tls.Conn's NetConn and this. Not to be called once the
// connection is on a loop.
func (f *tlsFeed) Unwrap() net.Conn { return f.Conn }

// tlsFeedOf is the feed under conn, a TLS connection accepted on a
// TLSListener; nil for anything else.
func tlsFeedOf(conn net.Conn) *tlsFeed {
	tc, ok := conn.(*tls.Conn)
	if !ok {
		return nil
	}
	f, _ := tc.NetConn().(*tlsFeed)
	return f
}

// attachTLS is Attach for a connection under TLS over feed: the TCP
// connection under the feed goes to l, the plaintext the HTTP server read
// past the request is read first, then what tls.Conn holds (offered to
// the fast path before the reader waits: see tlsLoop.settle). rmu, wmu
// and smu are held. On failure the socket is closed.
func (c *ServerConn) attachTLS(l *evloop.Loop, backlog int, feed *tlsFeed) error {
	lc, err := evloop.Attach(l, feed.Conn, nil)
	if err != nil {
		_ = c.sock.Close()
		return err
	}
	lc.SetBacklog(backlog)
	c.under = feed.Conn // (its socket is lc's now: closing it gives back its accounting)
	feed.Conn = lc
	c.tl = newTLSLoop(feed, c.conn.(*tls.Conn), c.pend, &c.take, &c.limit, true)
	c.pend = nil
	c.sock, c.lc, c.parked = lc, lc, false
	c.fastFn = c.tl.fast
	c.loopc.Store(lc)
	return nil
}
