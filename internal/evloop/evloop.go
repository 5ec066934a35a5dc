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
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
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
	ep    *os.File        // epfd in Go's poller: the loop parks there, not in epoll_wait
	raw   syscall.RawConn // ep's
	stop  [2]int          // a pipe: close writes to it, run returns
	done  chan struct{}
	mu    sync.Mutex // held by add and remove
	slots slots      // the Conns served, by slot: an event's Fd field is its Conn's slot
	free  []int32    // slots free again, under mu
	next  int32      // the next slot never used, under mu
	rbuf  []byte     // what the fast path reads into: the loop's, not a Conn's
}

// slots are a loop's Conns by slot, read by run without a lock: chunks
// of slotChunk made as needed, never freed (a slot's Conn is cleared).
type slots [maxSlots / slotChunk]atomic.Pointer[[slotChunk]atomic.Pointer[Conn]]

const (
	slotChunk = 256
	maxSlots  = 1 << 20 // per loop
)

// get is the Conn in slot i, or nil.
func (s *slots) get(i int32) *Conn {
	if i < 0 || int(i) >= maxSlots {
		return nil
	}
	ch := s[i/slotChunk].Load()
	if ch == nil {
		return nil
	}
	return ch[i%slotChunk].Load()
}

// readSize is what one read of the loop takes at most.
const readSize = 64 << 10

func newLoop() (*Loop, error) {
	fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("evloop: epoll: %w", err)
	}
	l := &Loop{epfd: fd, done: make(chan struct{}), rbuf: make([]byte, readSize), next: 1}
	err = syscall.Pipe2(l.stop[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK)
	if err == nil {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: stopSlot}
		err = syscall.EpollCtl(fd, syscall.EPOLL_CTL_ADD, l.stop[0], &ev)
		if err != nil {
			_ = syscall.Close(l.stop[0])
			_ = syscall.Close(l.stop[1])
		}
	}
	if err == nil {
		err = syscall.SetNonblock(fd, true)
	}
	if err != nil {
		_ = syscall.Close(fd)
		return nil, fmt.Errorf("evloop: epoll: %w", err)
	}
	l.ep = os.NewFile(uintptr(fd), "evloop")
	if l.raw, err = l.ep.SyscallConn(); err != nil {
		_ = l.ep.Close()
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
	var conns []*Conn
	for i := int32(1); i < l.next; i++ {
		if c := l.slots.get(i); c != nil {
			conns = append(conns, c)
		}
	}
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	for _, fd := range []int{l.stop[0], l.stop[1]} {
		_ = syscall.Close(fd)
	}
	_ = l.ep.Close()
}

// add watches c's socket: edge-triggered, for reads, writes and the
// peer's close.
func (l *Loop) add(c *Conn) error {
	l.mu.Lock()
	if n := len(l.free); n > 0 {
		c.slot, l.free = l.free[n-1], l.free[:n-1]
	} else if l.next < maxSlots {
		c.slot = l.next
		l.next++
	} else {
		l.mu.Unlock()
		return errors.New("evloop: the loop serves as many sockets as it can")
	}
	ch := l.slots[c.slot/slotChunk].Load()
	if ch == nil {
		ch = new([slotChunk]atomic.Pointer[Conn])
		l.slots[c.slot/slotChunk].Store(ch)
	}
	ch[c.slot%slotChunk].Store(c)
	l.mu.Unlock()
	ev := syscall.EpollEvent{Events: watch, Fd: c.slot}
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
	if l.slots.get(c.slot) == c {
		l.slots[c.slot/slotChunk].Load()[c.slot%slotChunk].Store(nil)
		l.free = append(l.free, c.slot)
	}
	l.mu.Unlock()
}

func (l *Loop) run() {
	defer close(l.done)
	events := make([]syscall.EpollEvent, 128)
	var n int
	var err error
	collect := func(fd uintptr) bool {
		n, err = epollPoll(int(fd), events)
		return n > 0 || err != nil && err != syscall.EINTR
	}
	for {
		// The loop parks in Go's poller on its epoll set (itself pollable)
		// and collects the set's events without blocking: a thread blocked
		// in epoll_wait would have the runtime hand its P to another
		// thread, and take one back, at every wake (measured: a quarter
		// more CPU at 200 voice sessions, docs/benchmarks.md).
		if rerr := l.raw.Read(collect); rerr != nil {
			err = rerr
		}
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			slog.Error("evloop: epoll wait failed; the loop's sockets are no longer served", "err", err)
			return
		}
		for _, ev := range events[:n] {
			if ev.Fd == stopSlot {
				return
			}
			c := l.slots.get(ev.Fd)
			if c == nil {
				continue // closed since (a slot used again since gets an event for nothing)
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

// stopSlot is the stop pipe's slot in events: no Conn's.
const stopSlot = 0

// epollPoll collects the set's events without waiting, in a raw system
// call: it never blocks, so the runtime need not be told.
func epollPoll(epfd int, events []syscall.EpollEvent) (int, error) {
	n, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])),
		uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// watch is what a socket is watched for: edge-triggered reads, writes
// and the peer's close.
const watch = uint32(syscall.EPOLLIN|syscall.EPOLLOUT|syscall.EPOLLRDHUP) | 1<<31 // EPOLLET
