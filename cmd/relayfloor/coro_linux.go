package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"iter"
	"log"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/turnstile-gw/turnstile/internal/wsbuf"
)

// The coroutine loop (-coro): what the gateway would keep of its code on
// an event loop (design-notes.md, "The gateway on a loop"). The browser's
// reader is the goroutine mode's own code (forward: read a message, write
// the Live socket), unchanged, run in a coroutine (iter.Pull) that one
// loop goroutine resumes when the browser's socket becomes readable; the
// read under it, finding nothing (EAGAIN), yields to the loop instead of
// parking in Go's poller. The socket is out of Go's poller (a duplicate
// of its descriptor; the net.Conn closed), and its writes — the pump's,
// on its own goroutine as in the goroutine mode — are plain writes that
// wait in poll(2) for the rare one the socket does not take. The Live
// socket keeps its goroutine (the pump): as in production, where it is
// TLS.
//
// It is an instrument: one loop goroutine, a coroutine that blocks (a
// Live write waiting for room) holds every session up meanwhile, and the
// browser's socket has no deadlines.

type coroLoop struct {
	epfd int
	// parked: the loop's goroutine waits for the epoll set in Go's poller
	// (the set's descriptor is pollable) rather than in epoll_wait: no
	// thread of its own (-coro-netpoll).
	parked bool
	// both: the upstream's reader (the pump) runs as a coroutine of the
	// loop too (-coro-both), its socket out of Go's poller from the dial.
	both  bool
	mu    sync.Mutex
	socks map[int32]*coroSock // by descriptor; the loop reads it under mu
	stop  [2]int              // a pipe: Close writes, the loop returns
	wake  [2]int              // a pipe: add writes, the loop resumes fresh
	fresh []*coroSock         // added, not yet resumed: what they hold already read is served at once
	done  chan struct{}
}

// coroSock is one browser socket on the loop, with its reader coroutine.
type coroSock struct {
	c    *fdConn
	next func() (struct{}, bool)
	end  func() // after the coroutine returned: on a goroutine of its own
	gone bool   // the coroutine returned (the loop's)
}

func newCoroLoop(parked, both bool) (*coroLoop, error) {
	l := &coroLoop{parked: parked, both: both, socks: map[int32]*coroSock{}, done: make(chan struct{})}
	fd, err := newEpoll(&l.stop, &l.wake)
	if err != nil {
		return nil, err
	}
	l.epfd = fd
	go l.run()
	return l, nil
}

// Close ends the loop; sessions still on it are dropped with the process.
func (l *coroLoop) Close() {
	_, _ = syscall.Write(l.stop[1], []byte{0})
	<-l.done
	for _, fd := range []int{l.stop[0], l.stop[1], l.wake[0], l.wake[1], l.epfd} {
		_ = syscall.Close(fd)
	}
}

func (l *coroLoop) run() {
	defer close(l.done)
	events := make([]syscall.EpollEvent, 256)
	wait := func() (int, error) { return syscall.EpollWait(l.epfd, events, -1) }
	if l.parked {
		wait = l.parkedWait(events)
		if wait == nil {
			return
		}
	}
	for {
		n, err := wait()
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			log.Printf("relayfloor: epoll: %v", err)
			return
		}
		for _, ev := range events[:n] {
			switch int(ev.Fd) {
			case l.stop[0]:
				return
			case l.wake[0]:
				var b [64]byte
				_, _ = syscall.Read(l.wake[0], b[:])
				l.mu.Lock()
				fresh := l.fresh
				l.fresh = nil
				l.mu.Unlock()
				for _, s := range fresh {
					l.resume(s)
				}
				continue
			}
			l.mu.Lock()
			s := l.socks[ev.Fd]
			l.mu.Unlock()
			if s != nil {
				l.resume(s)
			}
		}
	}
}

// resume runs s's reader until it yields (it read all there was) or
// returns: then the socket leaves the loop, and the rest of the session's
// end runs off it.
func (l *coroLoop) resume(s *coroSock) {
	if s.gone {
		return
	}
	if _, ok := s.next(); !ok {
		s.gone = true
		l.mu.Lock()
		delete(l.socks, int32(s.c.fd))
		l.mu.Unlock()
		_ = syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_DEL, s.c.fd, nil)
		go s.end()
	}
}

// parkedWait is a wait for the epoll set in Go's poller: its descriptor,
// non-blocking, read through a raw connection (an epoll set is readable
// while one of its sockets is ready).
func (l *coroLoop) parkedWait(events []syscall.EpollEvent) func() (int, error) {
	fd, err := syscall.Dup(l.epfd)
	if err == nil {
		err = syscall.SetNonblock(fd, true)
	}
	if err != nil {
		log.Printf("relayfloor: epoll: %v", err)
		return nil
	}
	f := os.NewFile(uintptr(fd), "epoll")
	go func() { <-l.done; _ = f.Close() }()
	raw, err := f.SyscallConn()
	if err != nil {
		log.Printf("relayfloor: epoll: %v", err)
		return nil
	}
	return func() (n int, err error) {
		rerr := raw.Read(func(fd uintptr) bool {
			n, err = syscall.EpollWait(int(fd), events, 0)
			return n != 0 || err != nil
		})
		if rerr != nil {
			return 0, rerr
		}
		return n, err
	}
}

// add puts c on the loop with read, run in a coroutine whose reads of c
// yield to the loop; end runs (on a goroutine) once read has returned.
func (l *coroLoop) add(c *fdConn, read func(), end func()) error {
	next, _ := iter.Pull(func(yield func(struct{}) bool) {
		c.yield = yield
		read()
		c.yield = nil // what reads it later (a close) waits in poll(2)
	})
	s := &coroSock{c: c, next: next, end: end}
	l.mu.Lock()
	l.socks[int32(c.fd)] = s
	l.mu.Unlock()
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(c.fd)}
	if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, c.fd, &ev); err != nil {
		l.mu.Lock()
		delete(l.socks, int32(c.fd))
		l.mu.Unlock()
		return err
	}
	// The set-up's reads may have taken more than they returned (a frame
	// sent right behind): the loop resumes the reader once at once.
	l.mu.Lock()
	l.fresh = append(l.fresh, s)
	l.mu.Unlock()
	_, _ = syscall.Write(l.wake[1], []byte{0})
	return nil
}

// serveCoro is ServeHTTP in -coro mode: the set-up as in the goroutine
// mode (its reads wait in poll(2)), then the browser's reader on the loop.
func (r *relay) serveCoro(w http.ResponseWriter, req *http.Request) {
	var fc *fdConn
	b, err := wsbuf.Accept(detachingWriter{w, &fc}, req, wsbuf.AcceptOptions{})
	if err != nil {
		return
	}
	b.SetReadLimit(readLimit)
	var uc *fdConn // the upstream's socket (-coro-both)
	var netDial func(context.Context, string, string) (net.Conn, error)
	if r.coro.both {
		netDial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialOut(ctx, network, addr)
			uc = c
			return c, err
		}
	}
	up, err := r.start(req.Context(), b, netDial)
	if err != nil {
		log.Printf("relayfloor: session start: %v", err)
		_ = b.Close(4102, "upstream: "+err.Error())
		_ = b.CloseNow()
		fc.release()
		return
	}
	if r.coro.both {
		r.serveCoroBoth(b, fc, up, uc)
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		pump(up, b)
	}()
	read := func() {
		if err := forward(b, up); !isEnd(err) {
			log.Printf("relayfloor: browser: %v", err)
		}
	}
	end := func() {
		_ = up.Close()
		_ = b.CloseNow()
		<-done
		fc.release() // nothing writes or reads it any more
	}
	if err := r.coro.add(fc, read, end); err != nil {
		log.Printf("relayfloor: %v", err)
		end()
	}
}

// serveCoroBoth puts both readers on the loop: the browser's (forward)
// and the upstream's (pump), each a coroutine; the session's sockets are
// released once both have returned.
func (r *relay) serveCoroBoth(b *wsbuf.ServerConn, fc *fdConn, up *wsbuf.Client, uc *fdConn) {
	var left sync.WaitGroup
	left.Add(2)
	go func() {
		left.Wait()
		fc.release()
		uc.release()
	}()
	read := func() {
		if err := forward(b, up); !isEnd(err) {
			log.Printf("relayfloor: browser: %v", err)
		}
	}
	endRead := func() { _ = up.Close(); _ = b.CloseNow(); left.Done() }
	endPump := func() { _ = b.CloseNow(); left.Done() }
	if err := r.coro.add(uc, func() { pump(up, b) }, endPump); err != nil {
		log.Printf("relayfloor: %v", err)
		endPump()
		endRead()
		return
	}
	if err := r.coro.add(fc, read, endRead); err != nil {
		log.Printf("relayfloor: %v", err)
		_ = up.Close() // the pump's coroutine reads the end, and ends
		endRead()
	}
}

// dialOut is -coro-both's NetDial: a TCP connection out of Go's poller,
// whose reader stays plain (no raw read of wsbuf's own, which would wait
// outside the loop's coroutine).
func dialOut(ctx context.Context, network, addr string) (*fdConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	fd, err := detach(c)
	if err != nil {
		return nil, err
	}
	return &fdConn{fd: fd, plain: true}, nil
}

// detachingWriter hands wsbuf.Accept the hijacked connection's socket
// out of Go's poller (fdConn), once the handshake's answer has gone.
type detachingWriter struct {
	http.ResponseWriter
	fc **fdConn
}

func (w detachingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	fd, err := detach(c)
	if err != nil {
		return nil, nil, err
	}
	fc := &fdConn{fd: fd}
	*w.fc = fc
	return fc, brw, nil
}

// fdConn is a socket out of Go's poller: reads that find nothing wait in
// poll(2), or, inside the loop's coroutine (yield set), yield to the loop;
// writes that the socket does not take wait in poll(2). Close shuts the
// socket down (the loop's reader then reads its end); the descriptor is
// closed by release, once nothing uses it.
type fdConn struct {
	fd     int
	plain  bool                // no Control: wsbuf reads it with plain reads, not inside one raw read
	yield  func(struct{}) bool // the coroutine's, once it runs
	closed atomic.Bool
}

func (c *fdConn) wait(events int16) error {
	if events == pollIn && c.yield != nil {
		if !c.yield(struct{}{}) {
			return net.ErrClosed
		}
		return nil
	}
	fds := []pollFd{{fd: int32(c.fd), events: events}}
	for {
		_, _, e := syscall.Syscall(syscall.SYS_POLL, uintptr(unsafe.Pointer(&fds[0])), 1, ^uintptr(0))
		if e != syscall.EINTR {
			if e != 0 {
				return e
			}
			return nil
		}
	}
}

func (c *fdConn) Read(p []byte) (int, error) {
	for {
		n, err := syscall.Read(c.fd, p)
		switch {
		case err == syscall.EAGAIN:
			if err := c.wait(pollIn); err != nil {
				return 0, err
			}
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		default:
			return n, nil
		}
	}
}

func (c *fdConn) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, err := syscall.Write(c.fd, p[done:])
		if n > 0 {
			done += n
		}
		switch {
		case err == syscall.EAGAIN:
			if err := c.wait(pollOut); err != nil {
				return done, err
			}
		case err != nil:
			return done, err
		}
	}
	return done, nil
}

// Close shuts the socket down; release closes the descriptor.
func (c *fdConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		return syscall.Shutdown(c.fd, syscall.SHUT_RDWR)
	}
	return nil
}

func (c *fdConn) release() {
	if c != nil {
		_ = c.Close()
		_ = syscall.Close(c.fd)
	}
}

func (c *fdConn) LocalAddr() net.Addr                { return fdAddr{} }
func (c *fdConn) RemoteAddr() net.Addr               { return fdAddr{} }
func (c *fdConn) SetDeadline(t time.Time) error      { return nil }
func (c *fdConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *fdConn) SetWriteDeadline(t time.Time) error { return nil }

// SyscallConn is the raw connection wsbuf's reader reads through.
func (c *fdConn) SyscallConn() (syscall.RawConn, error) { return fdRaw{c}, nil }

type fdRaw struct{ c *fdConn }

func (r fdRaw) Control(f func(fd uintptr)) error {
	if r.c.plain {
		return errors.New("relayfloor: no control of a loop's socket")
	}
	f(uintptr(r.c.fd))
	return nil
}

func (r fdRaw) Read(f func(fd uintptr) bool) error {
	for !f(uintptr(r.c.fd)) {
		if err := r.c.wait(pollIn); err != nil {
			return err
		}
	}
	return nil
}

func (r fdRaw) Write(f func(fd uintptr) bool) error {
	for !f(uintptr(r.c.fd)) {
		if err := r.c.wait(pollOut); err != nil {
			return err
		}
	}
	return nil
}

type fdAddr struct{}

func (fdAddr) Network() string { return "tcp" }
func (fdAddr) String() string  { return "fd" }

// pollFd is struct pollfd.
type pollFd struct {
	fd      int32
	events  int16
	revents int16
}

// poll(2)'s events (POLLIN, POLLOUT).
const (
	pollIn  int16 = 0x1
	pollOut int16 = 0x4
)
