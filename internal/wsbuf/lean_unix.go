//go:build unix

package wsbuf

import (
	"bufio"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// directMin: a read at least this large, with nothing pooled, goes
// straight into the caller's buffer (a frame's payload).
const directMin = 512

// heldSize is the library's write buffer, and the most a write holds back
// (see Write).
const heldSize = 128

// heldBuf is what a write holds back, and the writev that sends it with
// the rest of its frame: pooled, taken only while a frame larger than
// heldSize is being written, so that a connection between messages (an
// idle one) holds none of it (200 bytes).
type heldBuf struct {
	b     [heldSize]byte
	parts [2][]byte
	bufs  net.Buffers
}

var helds = sync.Pool{New: func() any { return new(heldBuf) }}

// leanConn is a TCP connection that holds no read buffer while it waits,
// and no write buffer between messages. Read is called by one goroutine at
// a time (the library's reader, under its read lock), Write by one at a
// time (under the library's write lock); the two share nothing.
type leanConn struct {
	net.Conn          // as hijacked: Close, addresses, deadlines
	sock     net.Conn // the socket under it, for writes

	sockReader // reading

	// Writing: held holds the one buffer-full the library flushed before
	// the rest of its frame (see Write), and sends both with one writev;
	// nil between frames.
	held  *heldBuf
	nheld int
}

// sockReader reads a socket holding no buffer while it waits: the read
// half of a lean connection, the server's (leanConn) or a dialled one
// (Client). Read is called by one goroutine at a time.
type sockReader struct {
	raw syscall.RawConn
	// in holds bytes read and not yet taken, in a pooled chunk (nil:
	// none); to is the caller's buffer for a direct read.
	in       *[]byte
	r        int
	to       []byte
	n        int
	rerr     error
	readFn   func(fd uintptr) bool
	sysReads int // read system calls made (what the tests count)

	// stay reads inside one raw read (stay_linux.go), when on; nil: one
	// raw read a fill. Set once, and read by a Close (closeStay).
	stay atomic.Pointer[stay]
}

// rawSocket is the socket under c, walking Unwrapper, and its raw
// connection; ok is false when there is none.
func rawSocket(c net.Conn) (sock net.Conn, raw syscall.RawConn, ok bool) {
	sock = c
	for {
		if _, ok := sock.(syscall.Conn); ok {
			break
		}
		u, ok := sock.(Unwrapper)
		if !ok {
			return nil, nil, false
		}
		sock = u.Unwrap()
	}
	raw, err := sock.(syscall.Conn).SyscallConn()
	if err != nil {
		return nil, nil, false
	}
	return sock, raw, true
}

// init readies the reader for raw.
func (c *sockReader) init(raw syscall.RawConn) {
	c.raw = raw
	c.readFn = c.readSocket
}

// newLeanConn makes c lean; pending is the HTTP server's reader, whose
// buffered bytes (a frame the client sent right after its handshake) are
// read first. ok is false for a connection without a socket under it
// (through Unwrapper).
func newLeanConn(c net.Conn, pending *bufio.Reader) (*leanConn, bool) {
	sock, raw, ok := rawSocket(c)
	if !ok {
		return nil, false
	}
	lc := &leanConn{Conn: c, sock: sock}
	lc.init(raw)
	if n := pending.Buffered(); n > 0 {
		b, _ := pending.Peek(n)
		lc.hold(b)
	}
	return lc, true
}

// Read reads the socket (see sockReader.Read).
func (c *leanConn) Read(p []byte) (int, error) { return c.sockReader.Read(p) }

// Read takes bytes already read first; with none, it waits for the
// socket to be readable holding no buffer, then reads what has arrived
// into a pooled chunk (or, for a large read, into p), in one system call
// as net.Conn's Read does.
func (c *sockReader) Read(p []byte) (int, error) {
	if c.in == nil {
		if len(p) >= directMin {
			c.to = p
			return c.fill()
		}
		if n, err := c.fill(); n == 0 {
			return 0, err
		}
	}
	n := copy(p, (*c.in)[c.r:])
	c.r += n
	if c.r == len(*c.in) {
		if cap(*c.in) == chunkSize {
			chunks.Put(c.in)
		}
		c.in, c.r = nil, 0
	}
	return n, nil
}

// fill reads once, into c.to when set, else into a pooled chunk that
// becomes c.in.
func (c *sockReader) fill() (int, error) {
	if st := c.stayOn(); st != nil {
		to := c.to
		n, left, err := c.pull(st)
		if !left {
			return n, err
		}
		c.to = to
	}
	err := c.raw.Read(c.readFn)
	c.to = nil
	if err != nil {
		return 0, err
	}
	return c.n, c.rerr
}

// readSocket is the raw read: false (nothing to read yet) has the runtime
// wait until the socket is readable and call it again.
func (c *sockReader) readSocket(fd uintptr) bool {
	buf, bp := c.to, (*[]byte)(nil)
	if buf == nil {
		bp = chunks.Get().(*[]byte)
		buf = (*bp)[:chunkSize]
	}
	n, err := c.sysRead(int(fd), buf)
	c.sysReads++
	for err == syscall.EINTR {
		n, err = c.sysRead(int(fd), buf)
		c.sysReads++
	}
	if err == syscall.EAGAIN {
		if bp != nil {
			chunks.Put(bp)
		}
		return false
	}
	switch {
	case err != nil:
		c.n, c.rerr = 0, os.NewSyscallError(c.sysReadName(), err)
	case n == 0:
		c.n, c.rerr = 0, io.EOF
	default:
		c.n, c.rerr = n, nil
	}
	if bp != nil {
		if c.n > 0 {
			*bp = (*bp)[:n]
			c.in, c.r = bp, 0
		} else {
			chunks.Put(bp)
		}
	}
	return true
}

// sysRead reads the socket: read(2), or for a reader that stays inside
// one raw read recvmsg(2), which also tells whether it drained the socket.
func (c *sockReader) sysRead(fd int, buf []byte) (int, error) {
	if st := c.stayOn(); st != nil {
		return st.recv(fd, buf)
	}
	return syscall.Read(fd, buf)
}

// sysReadName names sysRead's system call in its errors.
func (c *sockReader) sysReadName() string {
	if c.stayOn() != nil {
		return "recvmsg"
	}
	return "read"
}

// Write is called by the library's bufio.Writer (heldSize bytes): with
// its buffer full mid-frame — the frame's header and the first bytes of
// a payload that goes on — or at the end of a frame. A full buffer is
// held back and sent with the write that follows in one writev, so a
// frame still costs one system call. A frame that ends with the buffer
// exactly full cannot happen without compression: a payload under 126
// bytes has a 2-byte header (at most 127 in all), a longer one at least
// 130 bytes with its header, and after a held flush the rest comes in
// the same frame.
func (c *leanConn) Write(p []byte) (int, error) {
	if c.nheld == 0 {
		if len(p) == heldSize {
			c.held = helds.Get().(*heldBuf)
			c.nheld = copy(c.held.b[:], p)
			return len(p), nil
		}
		return c.sock.Write(p)
	}
	h, held := c.held, c.nheld
	c.held, c.nheld = nil, 0
	h.parts = [2][]byte{h.b[:held], p}
	h.bufs = h.parts[:]
	n, err := h.bufs.WriteTo(c.sock)
	h.parts = [2][]byte{}
	h.bufs = nil
	helds.Put(h)
	return max(int(n)-held, 0), err
}

// takeHeld returns the bytes read and not yet taken, copied, and gives
// their chunk back (a reader moving to an event loop).
func (c *sockReader) takeHeld() []byte {
	if c.in == nil {
		return nil
	}
	b := append([]byte(nil), (*c.in)[c.r:]...)
	chunks.Put(c.in)
	c.in, c.r = nil, 0
	return b
}
