package wsbuf

import (
	"encoding/binary"
	"errors"

	"github.com/gobwas/ws"

	"github.com/turnstile-gw/turnstile/internal/evloop"
)

// A connection on an event loop (package evloop; Linux): a Client dialled
// with DialOptions.Loop, a ServerConn moved with Attach. Its socket has
// left Go's poller for the loop's epoll set, and it is read and written
// through an evloop.Conn: writes never wait for the socket (what it does
// not take is kept, up to a backlog, and a Client's write deadline still
// fails the connection when kept bytes are not out by then); the reader
// reads as before, but while it waits between messages (Client.Wait,
// ServerConn.Next) every whole data message that arrives is first offered
// to the owner's fast path (SetFast) on the loop's goroutine: a message it
// takes wakes no goroutine. The first it does not take — or any control
// frame, fragmented message, or message over fastMax or the read limit —
// ends the wait, and the reader reads it and what follows as before; the
// fast path is offered messages again once the reader waits again, so
// messages are handled in the order they came, either way.

// FastFunc is a connection's fast path: one whole data message (binary,
// else text), unmasked, valid only during the call; it reports whether it
// took it. It runs on the event loop's goroutine while the reader waits,
// never at the same time as the reader: it may use what the reader owns.
// It must not wait (on the network, or on a lock held across a wait).
type FastFunc func(binary bool, p []byte) bool

// fastMax is the largest message offered to a fast path: half the loop's
// read, so that a message always fits whole in one.
const fastMax = 32 << 10

// fastFrames is an evloop.FastFunc: it offers take the whole data messages
// at the start of p (masked ones unmasked first, for a server; a message
// it does not take is masked back), and stops at the first it does not
// take (wake), or at a message not whole yet.
func fastFrames(p []byte, server, offerText bool, limit int64, take FastFunc) (used int, wake bool) {
	for {
		b := p[used:]
		if len(b) < 2 {
			return used, false
		}
		fin, rsv, op := b[0]&0x80 != 0, b[0]&0x70, ws.OpCode(b[0]&0x0f)
		masked, n, hl := b[1]&0x80 != 0, int64(b[1]&0x7f), 2
		switch n {
		case 126:
			if len(b) < 4 {
				return used, false
			}
			n, hl = int64(binary.BigEndian.Uint16(b[2:])), 4
		case 127:
			if len(b) < 10 {
				return used, false
			}
			n, hl = int64(binary.BigEndian.Uint64(b[2:])), 10
		}
		if !fin || rsv != 0 || masked != server || n < 0 || n > fastMax || n > limit ||
			!(op == ws.OpBinary || op == ws.OpText && offerText) {
			return used, true
		}
		var mask [4]byte
		if masked {
			if len(b) < hl+4 {
				return used, false
			}
			copy(mask[:], b[hl:hl+4])
			hl += 4
		}
		if int64(len(b)-hl) < n {
			return used, false
		}
		payload := b[hl : hl+int(n)]
		if masked {
			ws.Cipher(payload, mask, 0)
		}
		if !take(op == ws.OpBinary, payload) {
			if masked {
				ws.Cipher(payload, mask, 0) // as it came, for the reader
			}
			return used, true
		}
		used += hl + int(n)
	}
}

// fastOver is a connection's evloop.FastFunc over its fast path (*take,
// nil: every message is the reader's) and read limit: binary messages
// alone offered to a server's, text and binary to a client's.
func fastOver(take *FastFunc, limit *int64, server bool) evloop.FastFunc {
	return func(p []byte) (int, bool) {
		if *take == nil {
			return 0, true
		}
		return fastFrames(p, server, !server, *limit, *take)
	}
}

// errNotPlain is Attach's refusal for a connection that is not plain TCP
// read holding no buffer, nor TLS over a TLSListener's feed (a wrapper
// without a socket, another listener's TLS, not Unix).
var errNotPlain = errors.New("wsbuf: only a plain TCP connection moves to an event loop")

// OnLoop reports whether c's socket is served by an event loop: its writes
// never wait.
func (c *Client) OnLoop() bool { return c.lc != nil }

// SetFast sets the fast path of a Client on an event loop (nil: none), from
// the reader's goroutine, outside Wait; text and binary messages are
// offered. Without an event loop it does nothing.
func (c *Client) SetFast(f FastFunc) { c.take = f }

// attach moves c's socket to l after the handshake; br's bytes (read past
// the handshake's response) are read first. On failure the socket is
// closed.
func (c *Client) attach(l *evloop.Loop, pending []byte) error {
	lc, err := evloop.Attach(l, c.sock, pending)
	if err != nil {
		_ = c.sock.Close()
		return err
	}
	c.sock, c.conn, c.lean, c.pre, c.lc = lc, lc, nil, nil, lc
	c.fastFn = fastOver(&c.take, &c.limit, false)
	return nil
}

// OnLoop reports whether c's socket is served by an event loop: its writes
// never wait.
func (c *ServerConn) OnLoop() bool { return c.loopc.Load() != nil }

// SetFast sets the fast path of a ServerConn on an event loop (nil: none),
// from the reader's goroutine, between messages; binary messages alone are
// offered.
func (c *ServerConn) SetFast(f FastFunc) { c.take = f }

// Attach moves c's socket to l (Linux; plain TCP, or TLS accepted on a
// TLSListener): see OnLoop. The reader calls it, between messages; backlog
// bounds the bytes written that the socket has not taken (≤ 0: evloop's
// default), past which a write fails with evloop.ErrBacklog. A connection
// that cannot move (TLS over another listener's connection) stays as it
// was (errNotPlain), unless the move failed after the socket left Go's
// poller: the connection is then closed.
func (c *ServerConn) Attach(l *evloop.Loop, backlog int) error {
	if c.loopc.Load() != nil {
		return nil // (its fast path may call it: the reader's lock is held then)
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.lc != nil {
		return nil
	}
	if c.rend != nil {
		return c.rend
	}
	var feed *tlsFeed // under TLS
	if c.lean == nil {
		feed = tlsFeedOf(c.conn)
	}
	if c.lean == nil && feed == nil || c.inMsg || c.lean != nil && len(c.pend) > 0 || c.rerr != nil || !evloop.Supported {
		return errNotPlain
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.smu.Lock()
	defer c.smu.Unlock()
	if feed != nil {
		return c.attachTLS(l, backlog, feed) // (server_tls.go)
	}
	c.lean.exit() // a coroutine staying inside its raw read (StayInside) ends first
	lc, err := evloop.Attach(l, c.sock, c.lean.takeHeld())
	if err != nil {
		_ = c.sock.Close()
		return err
	}
	lc.SetBacklog(backlog)
	c.under = c.sock // (its socket is lc's now: closing it gives back its accounting)
	c.sock, c.conn, c.wconn, c.lean, c.lc, c.parked = lc, lc, lc, nil, lc, false
	c.fastFn = fastOver(&c.take, &c.limit, true)
	c.loopc.Store(lc)
	return nil
}
