package wsbuf

import (
	"crypto/tls"
	"net"
	"sync"

	"github.com/turnstile-gw/turnstile/internal/evloop"
)

// TLS on an event loop: crypto/tls fed by the loop, for a wss:// Client
// and for a ServerConn accepted over TLS on a TLSListener (server_tls.go).
//
// The tls.Conn is made over a feed, a net.Conn that is the TCP connection
// during the TLS and WebSocket handshakes and the evloop.Conn after them.
// On the fast path (the loop hands over ciphertext) the feed serves
// tls.Conn's reads from that ciphertext alone, and then fails them with a
// temporary net.Error, which crypto/tls survives (it keeps a partial
// record for the next read, and poisons the connection only on an error
// that is not temporary): the fast path decrypts everything the loop
// handed over into the plaintext buffer and offers the whole messages
// there to fastFrames. The reader, once woken, reads that buffer first,
// then tls.Conn, whose feed then reads the evloop.Conn as any reader
// (evloop.Conn.Read: what the fast path left, then the socket). The fast
// path and the reader never run at once (evloop's contract), so the feed's
// reading side is theirs in turn. Writes go through tls.Conn to the
// evloop.Conn and never wait.

// tlsLoop is a connection's TLS on an event loop: a Client's or a
// ServerConn's.
type tlsLoop struct {
	feed *tlsFeed
	tc   *tls.Conn
	pt   *[]byte // plaintext decrypted and not yet taken or read, from pt[off:]; nil when none
	off  int
	err  error // what a read of tc failed with on the fast path: the reader's, after pt
	full bool  // the last read of tc filled what it was given: tc may hold more plaintext

	// The owner's, for fastFrames: its fast path (nil: every message is
	// the reader's) and read limit, and its side (a server's messages come
	// masked, and binary ones alone are offered).
	take   *FastFunc
	limit  *int64
	server bool
}

// newTLSLoop is the TLS over feed, its socket on a loop now; pending
// (plaintext read past the handshakes) is read first.
func newTLSLoop(feed *tlsFeed, tc *tls.Conn, pending []byte, take *FastFunc, limit *int64, server bool) *tlsLoop {
	t := &tlsLoop{feed: feed, tc: tc, take: take, limit: limit, server: server}
	if len(pending) > 0 {
		t.pt = pts.Get().(*[]byte)
		*t.pt = append((*t.pt)[:0], pending...)
	}
	return t
}

// ptCap is the plaintext buffer's size: a whole message of fastMax and
// its header fit with a TLS record's plaintext (16 KiB) to spare, so a
// message the fast path may take is always decrypted whole.
const ptCap = fastMax + 16<<10 + 16

var pts = sync.Pool{New: func() any { b := make([]byte, 0, ptCap); return &b }}

// tlsFeed is the net.Conn under a loop's tls.Conn (see above).
//
// It follows the TLS records in what it hands tls.Conn, from the first
// byte of the handshake (every record has a 5-byte header ending in its
// length), and on the fast path hands no more than the rest of the
// current record in one read: tls.Conn then holds no whole record it has
// not read, so that once it has returned a record's plaintext with the
// feed used up at a record's end, the fast path knows it holds nothing
// more and need not read it again to find out (a read that would cost
// crypto/tls an allocation, its reader of the connection).
type tlsFeed struct {
	net.Conn        // the TCP connection, then the evloop.Conn
	fed      []byte // on the fast path: the ciphertext not yet read by tls.Conn
	feeding  bool   // reads come from fed alone, errFedAll once it is used up
	unsure   bool   // a read not bounded by records since tls.Conn last asked for more than it had
	hn       int    // bytes of the current record's header handed over (5: all, its body's follow)
	left     int    // bytes of the current record's body not handed over yet
	hdr      [5]byte
}

func (f *tlsFeed) Read(p []byte) (int, error) {
	if !f.feeding {
		n, err := f.Conn.Read(p)
		f.follow(p[:n])
		f.unsure = true
		return n, err
	}
	if len(f.fed) == 0 {
		f.unsure = false // tls.Conn holds no more than a part of the record
		return 0, errFedAll
	}
	k := min(len(f.fed), f.left) // to the current record's end
	if f.hn < 5 {
		k = len(f.fed)
		if h := 5 - f.hn; k >= h {
			var hdr [5]byte
			copy(hdr[copy(hdr[:], f.hdr[:f.hn]):], f.fed[:h])
			k = min(k, h+(int(hdr[3])<<8|int(hdr[4])))
		}
	}
	n := copy(p, f.fed[:k])
	f.follow(f.fed[:n])
	f.fed = f.fed[n:]
	return n, nil
}

// follow moves the record boundaries on past b, handed to tls.Conn.
func (f *tlsFeed) follow(b []byte) {
	for len(b) > 0 {
		if f.hn < 5 {
			k := copy(f.hdr[f.hn:], b)
			f.hn += k
			b = b[k:]
			if f.hn == 5 {
				f.left = int(f.hdr[3])<<8 | int(f.hdr[4])
			}
		} else {
			k := min(len(b), f.left)
			f.left -= k
			b = b[k:]
		}
		if f.hn == 5 && f.left == 0 {
			f.hn = 0
		}
	}
}

// drained reports whether tls.Conn holds nothing the feed handed it:
// fed is used up at a record's end, and tls.Conn read no more than a
// record at a time since it last asked for more than it had.
func (f *tlsFeed) drained() bool { return len(f.fed) == 0 && f.hn == 0 && !f.unsure }

// fedAll is the feed's temporary error: the ciphertext the loop handed
// over is used up (tls.Conn keeps what it read of a record, and reads on).
type fedAll struct{}

func (fedAll) Error() string   { return "wsbuf: the event loop's bytes are used up" }
func (fedAll) Timeout() bool   { return false }
func (fedAll) Temporary() bool { return true }

var errFedAll net.Error = fedAll{}

// tlsClient is Dial's TLS client for a wss URL: over a feed when the
// connection may go to an event loop (conn, the TCP connection, is sock),
// and then the feed is kept in *feed.
func tlsClient(cfg *tls.Config, sock *net.Conn, loop bool, feed **tlsFeed) func(net.Conn, string) net.Conn {
	return func(conn net.Conn, _ string) net.Conn {
		if loop && conn == *sock {
			*feed = &tlsFeed{Conn: conn, unsure: true}
			return tls.Client(*feed, cfg)
		}
		return tls.Client(conn, cfg)
	}
}

// attachTLS moves c's socket, under TLS over feed, to l after the
// handshakes; pending (plaintext the handshake read past its response) is
// read first. On failure the socket is closed.
func (c *Client) attachTLS(l *evloop.Loop, feed *tlsFeed, pending []byte) error {
	tc, ok := c.conn.(*tls.Conn)
	if !ok {
		_ = c.sock.Close()
		return errNotPlain
	}
	lc, err := evloop.Attach(l, feed.Conn, nil)
	if err != nil {
		_ = c.sock.Close()
		return err
	}
	feed.Conn = lc
	t := newTLSLoop(feed, tc, pending, &c.take, &c.limit, false)
	c.sock, c.lean, c.pre, c.lc, c.tl = lc, nil, nil, lc, t
	c.fastFn = t.fast
	return nil
}

// fast is the connection's evloop.FastFunc: p (ciphertext) is decrypted
// into the plaintext buffer and the whole messages there offered to the
// fast path, until one wakes the reader (what tls.Conn has not read of p
// is then left to the loop for the reader) or p is used up.
func (t *tlsLoop) fast(p []byte) (int, bool) {
	if *t.take == nil {
		return 0, true
	}
	t.feed.fed, t.feed.feeding = p, true
	wake := t.offer()
	used := len(p) - len(t.feed.fed)
	t.feed.fed, t.feed.feeding = nil, false
	return used, wake
}

// offer offers the whole messages decrypted to the fast path, decrypting
// what the feed holds as room is made, until the fast path wakes the
// reader (true) or the feed is used up with no message whole (false).
func (t *tlsLoop) offer() bool {
	for {
		if t.pt != nil {
			used, wake := fastFrames((*t.pt)[t.off:], t.server, !t.server, *t.limit, *t.take)
			t.off += used
			if wake {
				return true
			}
			if t.off > 0 {
				b := *t.pt
				*t.pt = b[:copy(b, b[t.off:])] // the start of a message not whole yet
				t.off = 0
			}
		}
		if t.err != nil {
			return true
		}
		if !t.full && t.feed.drained() {
			t.release()
			return false
		}
		if t.pt == nil {
			t.pt = pts.Get().(*[]byte)
			*t.pt = (*t.pt)[:0]
		}
		b := *t.pt
		if len(b) == cap(b) {
			return true // (fastFrames wakes for a message this long)
		}
		n, err := t.tc.Read(b[len(b):cap(b)])
		*t.pt = b[:len(b)+n]
		t.full = n == cap(b)-len(b)
		if err != nil && err != errFedAll {
			t.err = err // the reader's once it has read what came before
		}
		if n == 0 && err == errFedAll {
			t.release()
			return false
		}
	}
}

// release gives the plaintext buffer back once nothing is left in it.
func (t *tlsLoop) release() {
	if t.pt != nil && len(*t.pt) == t.off {
		pts.Put(t.pt)
		t.pt, t.off = nil, 0
	}
}

// settle offers the fast path what tls.Conn holds decrypted or whole
// already (read past what the reader read), before the reader waits for
// the loop: no bytes arriving would announce it. It reports whether the
// reader is to read on rather than wait.
func (t *tlsLoop) settle() bool {
	_, wake := t.fast(nil)
	return wake
}

// read is the reader's: the plaintext buffer, then tls.Conn.
func (t *tlsLoop) read(p []byte) (int, error) {
	t.release()
	if t.pt != nil {
		n := copy(p, (*t.pt)[t.off:])
		t.off += n
		t.release()
		return n, nil
	}
	if t.err != nil {
		return 0, t.err
	}
	return t.tc.Read(p)
}

// close sends TLS's close_notify (a write, which never waits on the loop)
// and closes the socket.
func (t *tlsLoop) close() error { return t.tc.Close() }
