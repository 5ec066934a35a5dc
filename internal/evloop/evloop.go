//go:build linux

// Package evloop serves sockets from event loops: goroutines each waiting
// in epoll_wait(2) on a set of sockets taken out of Go's poller, rather
// than a goroutine parked per socket. A voice session's two WebSockets
// (the browser's, the model's) join one loop once audio streams; each
// frame of audio that arrives is then relayed by the loop's goroutine
// where it was read (a Conn's fast path, Wait), with no goroutine woken
// for it, while every other message still goes to the goroutine that
// owns the socket, in order.
//
// A Conn is a net.Conn over a socket a loop watches. Its owner reads it
// as any connection (Read), or waits in Wait while the loop hands what
// arrives to a fast path first. Writes never wait for the socket: what it
// does not take is kept (up to a backlog) and written by the loop as the
// socket takes it (ErrBacklog, the write deadline).
//
// Linux only (evloop_other.go says so elsewhere).
package evloop

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
)

// Supported reports whether this platform has event loops.
const Supported = true

// Pool is a fixed set of loops; a caller picks one per session (Loop), so
// that both sockets of a session are served by the same goroutine.
type Pool struct {
	loops []*Loop
}

// NewPool starts n loops (at least one).
func NewPool(n int) (*Pool, error) {
	p := &Pool{}
	for range max(n, 1) {
		l, err := newLoop()
		if err != nil {
			p.Close()
			return nil, err
		}
		p.loops = append(p.loops, l)
	}
	return p, nil
}

// Loop is the loop for key (a session's).
func (p *Pool) Loop(key uint64) *Loop { return p.loops[key%uint64(len(p.loops))] }

// Close stops every loop and closes what they still serve.
func (p *Pool) Close() {
	for _, l := range p.loops {
		l.close()
	}
}

// Loop is one goroutine waiting on one epoll set.
type Loop struct {
	epfd  int
	stop  [2]int // a pipe: close writes to it, run returns
	done  chan struct{}
	mu    sync.Mutex
	conns map[int32]*Conn // by descriptor; run reads it under mu
	rbuf  []byte          // what the fast path reads into: the loop's, not a Conn's
}

// readSize is what one read of the loop takes at most.
const readSize = 64 << 10

func newLoop() (*Loop, error) {
	fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("evloop: epoll: %w", err)
	}
	l := &Loop{epfd: fd, done: make(chan struct{}), conns: map[int32]*Conn{}, rbuf: make([]byte, readSize)}
	err = syscall.Pipe2(l.stop[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK)
	if err == nil {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(l.stop[0])}
		err = syscall.EpollCtl(fd, syscall.EPOLL_CTL_ADD, l.stop[0], &ev)
		if err != nil {
			_ = syscall.Close(l.stop[0])
			_ = syscall.Close(l.stop[1])
		}
	}
	if err != nil {
		_ = syscall.Close(fd)
		return nil, fmt.Errorf("evloop: epoll: %w", err)
	}
	go l.run()
	return l, nil
}

// close ends the loop's goroutine and closes every Conn it serves.
func (l *Loop) close() {
	_, _ = syscall.Write(l.stop[1], []byte{0})
	<-l.done
	l.mu.Lock()
	conns := make([]*Conn, 0, len(l.conns))
	for _, c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	for _, fd := range []int{l.stop[0], l.stop[1], l.epfd} {
		_ = syscall.Close(fd)
	}
}

// add watches c's socket: edge-triggered, for reads, writes and the
// peer's close.
func (l *Loop) add(c *Conn) error {
	l.mu.Lock()
	l.conns[int32(c.fd)] = c
	l.mu.Unlock()
	ev := syscall.EpollEvent{Events: watch, Fd: int32(c.fd)}
	if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, c.fd, &ev); err != nil {
		l.remove(c)
		return fmt.Errorf("evloop: epoll add: %w", err)
	}
	return nil
}

// remove forgets c (its descriptor is about to close, which takes it out
// of the epoll set).
func (l *Loop) remove(c *Conn) {
	l.mu.Lock()
	if l.conns[int32(c.fd)] == c {
		delete(l.conns, int32(c.fd))
	}
	l.mu.Unlock()
}

func (l *Loop) run() {
	defer close(l.done)
	events := make([]syscall.EpollEvent, 128)
	for {
		n, err := syscall.EpollWait(l.epfd, events, -1)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			slog.Error("evloop: epoll wait failed; the loop's sockets are no longer served", "err", err)
			return
		}
		for _, ev := range events[:n] {
			if ev.Fd == int32(l.stop[0]) {
				return
			}
			l.mu.Lock()
			c := l.conns[ev.Fd]
			l.mu.Unlock()
			if c == nil {
				continue // closed since; or a descriptor reused by one added after this wait
			}
			if ev.Events&(syscall.EPOLLOUT|syscall.EPOLLERR|syscall.EPOLLHUP) != 0 {
				c.flush()
			}
			if ev.Events&(syscall.EPOLLIN|syscall.EPOLLRDHUP|syscall.EPOLLERR|syscall.EPOLLHUP) != 0 {
				c.onReadable(l.rbuf, ev.Events&(syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0)
			}
		}
	}
}

// watch is what a socket is watched for: edge-triggered reads, writes
// and the peer's close.
const watch = uint32(syscall.EPOLLIN|syscall.EPOLLOUT|syscall.EPOLLRDHUP) | 1<<31 // EPOLLET
