//go:build linux

package evloop

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// rawIO is read(2) or write(2) (trap) of p on a non-blocking socket, in a
// raw system call: it never blocks (EAGAIN instead), so the runtime need
// not be told, which costs more than the call on the loop's path.
func rawIO(trap uintptr, fd int, p []byte) (int, error) {
	var ptr unsafe.Pointer
	if len(p) > 0 {
		ptr = unsafe.Pointer(&p[0])
	}
	n, _, e := syscall.RawSyscall(trap, uintptr(fd), uintptr(ptr), uintptr(len(p)))
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}

// ErrBacklog is a write's error once what the socket has not taken would
// pass the connection's backlog (SetBacklog): the peer is not reading.
// Every later write fails with it too.
var ErrBacklog = errors.New("evloop: the peer is not reading: write backlog full")

// DefaultBacklog is a Conn's backlog until SetBacklog.
const DefaultBacklog = 1 << 20

// FastFunc is a Conn's fast path (Wait): given every byte that has
// arrived and is not consumed yet, in order, it consumes what it can from
// the start — whole messages — and reports how many bytes (used), and
// whether what follows is for the owner (wake; else it waits for more
// bytes: a message not whole yet). It runs on the loop's goroutine, or the
// owner's in Wait, never both at once, and never while the owner reads; p
// is valid only during the call, and may be changed by it.
type FastFunc func(p []byte) (used int, wake bool)

// Conn is a socket served by a Loop, as a net.Conn. One goroutine (its
// owner) reads, with Read or Wait; writes may come from any goroutine, the
// loop's included, and never wait for the socket. Reads and writes take
// one lock, held over their (non-blocking) system calls, never over a
// wait or a FastFunc.
type Conn struct {
	// What every event reads first: the descriptor, the lock, and whether
	// anything is kept to write.
	fd     int
	mu     sync.Mutex
	kept   atomic.Bool // out holds bytes: the loop's flush looks, else it need not lock
	closed bool
	l      *Loop
	slot   int32 // in l's slots: its events' key

	// Reading.
	in       *[]byte  // from ins: bytes arrived and not consumed, from inOff; nil when none
	inOff    int      // where in's unconsumed bytes start
	rerr     error    // the read side's end, after in: io.EOF, a reset
	readable bool     // an edge came that nothing has read for yet
	hup      bool     // an edge said the peer's end came: a short read may not have reached it
	fast     FastFunc // set while the owner waits in Wait: the loop hands what arrives to it
	inFast   bool     // the loop is running fast: the owner waits until it is out
	waiting  bool     // the owner waits on sig
	sig      chan struct{}
	rdl      time.Time // read deadline

	// Writing.
	out     []byte // what the socket has not taken yet
	werr    error
	backlog int
	wdl     time.Time   // write deadline: what is kept must be out by then
	wtimer  *time.Timer // armed while out is kept under a deadline

	laddr, raddr net.Addr
}

var ins = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// Attach takes nc's socket out of Go's poller and into l, and returns it
// as a Conn; pending are bytes already read from it and not consumed (they
// are read first). nc (a *net.TCPConn, or a wrapper of one that implements
// Unwrap() net.Conn) is closed: its descriptor is the Conn's now, and a
// wrapper's own Close (an accounting of connections) may still be called.
func Attach(l *Loop, nc net.Conn, pending []byte) (*Conn, error) {
	sock := nc
	for {
		if _, ok := sock.(syscall.Conn); ok {
			break
		}
		u, ok := sock.(interface{ Unwrap() net.Conn })
		if !ok {
			return nil, errors.New("evloop: not a socket")
		}
		sock = u.Unwrap()
	}
	rc, err := sock.(syscall.Conn).SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	cerr := rc.Control(func(s uintptr) {
		fd, err = dupCloexec(int(s))
	})
	if cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, err
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		_ = syscall.Close(fd)
		return nil, err
	}
	c := &Conn{l: l, fd: fd, laddr: sock.LocalAddr(), raddr: sock.RemoteAddr(), sig: make(chan struct{}, 1),
		backlog: DefaultBacklog}
	_ = sock.Close() // out of Go's poller; the socket lives on in fd
	if len(pending) > 0 {
		c.in = ins.Get().(*[]byte)
		*c.in = append((*c.in)[:0], pending...)
	}
	// Whatever arrived before the socket joined the set raised no edge
	// for the loop: the first read looks.
	c.readable = true
	if err := l.add(c); err != nil {
		_ = syscall.Close(fd)
		return nil, err
	}
	return c, nil
}

func dupCloexec(fd int) (int, error) {
	nfd, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 0)
	if errno != 0 {
		return -1, errno
	}
	return int(nfd), nil
}

// SetBacklog bounds what the socket may not have taken yet (n ≤ 0: the
// default): a write past it fails with ErrBacklog.
func (c *Conn) SetBacklog(n int) {
	if n <= 0 {
		n = DefaultBacklog
	}
	c.mu.Lock()
	c.backlog = n
	c.mu.Unlock()
}

// Buffered is how many written bytes the socket has not taken yet.
func (c *Conn) Buffered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.out)
}

// Read reads what has arrived, waiting for it (up to the read deadline)
// when nothing has.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if c.in != nil {
			n := copy(p, (*c.in)[c.inOff:])
			c.consume(n)
			return n, nil
		}
		if c.rerr != nil {
			return 0, c.rerr
		}
		if c.closed {
			return 0, net.ErrClosed
		}
		if !c.rdl.IsZero() && !time.Now().Before(c.rdl) {
			return 0, os.ErrDeadlineExceeded
		}
		c.readable = false
		n, err := c.sysRead(p)
		if n > 0 {
			// A read that filled p may have left more: no edge will say
			// so (one comes only when more arrives), so a Wait reads
			// before it waits. A short one took all there was, but
			// for the peer's end, if it came (no edge will say so).
			c.readable = n == len(p) || c.hup
			return n, nil
		}
		if err == syscall.EAGAIN {
			c.waitLocked(c.rdl)
		}
	}
}

// sysRead reads the socket once; c.mu is held. An end of the read side
// is kept in rerr; EAGAIN is returned.
func (c *Conn) sysRead(p []byte) (int, error) {
	for {
		n, err := rawIO(syscall.SYS_READ, c.fd, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return 0, err
		case err != nil:
			c.rerr = &net.OpError{Op: "read", Net: "tcp", Source: c.laddr, Addr: c.raddr, Err: os.NewSyscallError("read", err)}
			return 0, c.rerr
		case n == 0:
			c.rerr = io.EOF
			return 0, c.rerr
		}
		return n, nil
	}
}

// consume drops n bytes from the start of in, giving its buffer back once
// it is empty; c.mu is held.
func (c *Conn) consume(n int) {
	c.inOff += n
	if c.inOff >= len(*c.in) {
		ins.Put(c.in)
		c.in, c.inOff = nil, 0
	}
}

// keep sets in to rest (what a fast path left); c.mu is held.
func (c *Conn) keep(rest []byte) {
	if c.in != nil {
		ins.Put(c.in)
		c.in, c.inOff = nil, 0
	}
	if len(rest) > 0 {
		c.in = ins.Get().(*[]byte)
		*c.in = append((*c.in)[:0], rest...)
	}
}

// waitLocked waits (c.mu held, released meanwhile) for the loop's signal,
// a Close, or the deadline.
func (c *Conn) waitLocked(deadline time.Time) {
	c.waiting = true
	c.mu.Unlock()
	if deadline.IsZero() {
		<-c.sig
	} else if d := time.Until(deadline); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-c.sig:
		case <-t.C:
		}
		t.Stop()
	}
	c.mu.Lock()
	c.waiting = false
}

// signal wakes the owner if it waits; c.mu is held.
func (c *Conn) signal() {
	if c.waiting {
		select {
		case c.sig <- struct{}{}:
		default:
		}
	}
}

// Wait waits until something has arrived that fast does not consume, the
// read side ends, or the Conn closes; meanwhile every byte that arrives
// is given to fast first, on the loop's goroutine (or on the caller's, for
// bytes that were here already). Read then reads what fast left.
func (c *Conn) Wait(fast FastFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for !c.closed && c.rerr == nil {
		if c.in != nil {
			p := (*c.in)[c.inOff:]
			c.mu.Unlock()
			used, wake := fast(p)
			c.mu.Lock()
			if c.closed {
				return
			}
			if used > 0 {
				c.consume(used)
			}
			if wake {
				return
			}
		}
		if c.readable {
			c.readInto() // an end of the read side ends the loop
			continue
		}
		c.fast = fast
		c.waitLocked(time.Time{})
		for c.inFast { // the loop is in fast: it signals when out
			c.waitLocked(time.Time{})
		}
		if c.fast == nil { // the loop handed over: what it left is the owner's
			return
		}
		c.fast = nil
	}
}

// readInto reads what has arrived onto the end of in, for Wait; c.mu is
// held.
func (c *Conn) readInto() {
	c.readable = false
	if c.in == nil {
		c.in = ins.Get().(*[]byte)
		*c.in = (*c.in)[:0]
	}
	b := *c.in
	if len(b) == cap(b) {
		b = append(b, 0)[:len(b)]
	}
	n, err := c.sysRead(b[len(b):cap(b)])
	*c.in = b[:len(b)+max(n, 0)]
	if n > 0 && (len(b)+n == cap(b) || c.hup) {
		c.readable = true // it may hold more, or the end
	}
	if len(*c.in) == c.inOff {
		ins.Put(c.in)
		c.in, c.inOff = nil, 0
	}
	_ = err // kept in rerr
}

// onReadable is the loop's: the socket has something to read (or the peer
// closed: hup).
func (c *Conn) onReadable(buf []byte, hup bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hup = c.hup || hup
	for {
		if c.closed {
			return
		}
		fast := c.fast
		if fast == nil {
			c.readable = true
			c.signal()
			return
		}
		n0 := 0
		if c.in != nil {
			n0 = copy(buf, (*c.in)[c.inOff:])
			if n0 == len(buf) {
				c.fast = nil // a message larger than a read: the owner's
				c.signal()
				return
			}
		}
		n, err := c.sysRead(buf[n0:])
		if n <= 0 {
			if err != syscall.EAGAIN {
				c.fast = nil
				c.signal()
			}
			return
		}
		more := n0+n == len(buf) || hup
		if c.in != nil {
			ins.Put(c.in)
			c.in, c.inOff = nil, 0
		}
		c.inFast = true
		c.mu.Unlock()
		used, wake := fast(buf[:n0+n])
		c.mu.Lock()
		c.inFast = false
		if c.closed {
			c.signal()
			return
		}
		c.keep(buf[used : n0+n])
		if wake {
			c.readable = c.readable || more // what the read left, or the end, raises no edge
			c.fast = nil
			c.signal()
			return
		}
		if !more {
			return
		}
	}
}

// Write writes p, or keeps what the socket does not take for the loop to
// write when it can; it never waits. Past the backlog it fails
// (ErrBacklog), and past a write deadline with bytes still kept it fails
// (os.ErrDeadlineExceeded); either fails every later write too.
func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.werr != nil {
		return 0, c.werr
	}
	if c.closed {
		return 0, net.ErrClosed
	}
	if len(c.out) > 0 && !c.wdl.IsZero() && !time.Now().Before(c.wdl) {
		c.failWrite(os.ErrDeadlineExceeded)
		return 0, c.werr
	}
	rest := p
	if len(c.out) == 0 {
		n, err := c.sysWrite(p)
		if err != nil {
			return 0, c.werr
		}
		rest = p[n:]
	}
	if len(rest) == 0 {
		return len(p), nil
	}
	if len(c.out)+len(rest) > c.backlog {
		c.failWrite(ErrBacklog)
		return 0, c.werr
	}
	c.out = append(c.out, rest...)
	c.kept.Store(true)
	c.armWrite()
	return len(p), nil
}

// sysWrite writes what the socket takes of p; c.mu is held. An error
// other than EAGAIN fails the writing (werr).
func (c *Conn) sysWrite(p []byte) (int, error) {
	for {
		n, err := rawIO(syscall.SYS_WRITE, c.fd, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return 0, nil
		case err != nil:
			c.failWrite(&net.OpError{Op: "write", Net: "tcp", Source: c.laddr, Addr: c.raddr, Err: os.NewSyscallError("write", err)})
			return 0, c.werr
		}
		return n, nil
	}
}

// failWrite ends the writing with err, dropping what was kept; c.mu is
// held.
func (c *Conn) failWrite(err error) {
	if c.werr == nil {
		c.werr = err
	}
	c.out = nil
	c.kept.Store(false)
	if c.wtimer != nil {
		c.wtimer.Stop()
	}
}

// armWrite starts the write deadline's timer while bytes are kept; c.mu
// is held.
func (c *Conn) armWrite() {
	if c.wdl.IsZero() {
		return
	}
	d := time.Until(c.wdl)
	if c.wtimer == nil {
		c.wtimer = time.AfterFunc(d, c.writeLate)
		return
	}
	c.wtimer.Reset(d)
}

// writeLate is the write deadline's timer: bytes still kept at the
// deadline fail the writing.
func (c *Conn) writeLate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.out) == 0 || c.wdl.IsZero() {
		return
	}
	if d := time.Until(c.wdl); d > 0 {
		c.wtimer.Reset(d)
		return
	}
	c.failWrite(os.ErrDeadlineExceeded)
}

// flush is the loop's: the socket may take what was kept.
func (c *Conn) flush() {
	if !c.kept.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || len(c.out) == 0 {
		return
	}
	n, err := c.sysWrite(c.out)
	if err != nil {
		return
	}
	if n == len(c.out) {
		c.out = nil
		c.kept.Store(false)
		if c.wtimer != nil {
			c.wtimer.Stop()
		}
		return
	}
	c.out = c.out[:copy(c.out, c.out[n:])]
}

// Close closes the socket at once (what was kept is dropped) and wakes
// the owner.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return net.ErrClosed
	}
	c.closed = true
	c.l.remove(c)
	err := syscall.Close(c.fd) // leaves the epoll set with it
	// in is dropped, not pooled: an owner's fast path may be reading it.
	c.in, c.inOff = nil, 0
	c.out = nil
	if c.wtimer != nil {
		c.wtimer.Stop()
	}
	c.signal()
	return err
}

func (c *Conn) LocalAddr() net.Addr  { return c.laddr }
func (c *Conn) RemoteAddr() net.Addr { return c.raddr }

// SetDeadline sets both deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	_ = c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

// SetReadDeadline bounds Read's wait (not Wait's).
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rdl = t
	c.signal()
	return nil
}

// SetWriteDeadline sets when bytes the socket has not taken fail the
// writing.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wdl = t
	if len(c.out) > 0 {
		c.armWrite()
	}
	return nil
}
