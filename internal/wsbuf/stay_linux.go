//go:build linux && !386

package wsbuf

import (
	"iter"
	"net"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// A reader that stays inside one raw read (the dialled side's: Client).
//
// A raw read (syscall.RawConn.Read) begins by forgetting whether the
// socket became readable (internal/poll's prepareRead), so a reader making
// one raw read a message first reads the socket only to find it empty
// (EAGAIN), waits, then reads the message: two read system calls a
// message. Within one raw read the runtime forgets nothing: when the read
// function returns false it waits for the socket's next edge (the poller
// is edge-triggered, and the kernel raises one on every arrival), and
// returns at once if one came since. So a reader that stays inside one raw
// read and, after a read that drained the socket, waits instead of reading
// again makes one read system call a message. Bytes that arrive after that
// read raise an edge: none is missed. A deadline or a close still ends the
// wait, as in any raw read.
//
// "Drained" is the kernel's word, not a short read's: a read stops short
// of a FIN that came with the bytes before it (the peer's last message,
// then its close), and that FIN's edge was the one the reader woke on. The
// reads are recvmsg(2) with TCP_INQ, whose control message says how many
// bytes are left, and counts a FIN not yet read as one (tcp_inq_hint).
// What it does not count is a reset that came right behind the bytes
// before it: the reader then waits until the connection's next write
// fails, which shuts the read side (Client.write, kick), or until Close.
//
// The reader's consumer pulls (Wait, Next, Read), so the raw read runs in
// a coroutine (iter.Pull): it yields after each read and is resumed for
// the next, a direct switch between the two rather than the scheduler's
// wake of a parked goroutine.
//
// Closing: a suspended coroutine holds the socket's read lock, and closing
// the socket waits until no read holds it. So Close (leave) first ends a
// suspended coroutine; one the consumer is running ends on the socket's
// close (a waiting raw read returns net.ErrClosed), or, if it yields
// first, the consumer sees the close and ends it. Both mark before they
// look (sequentially consistent atomics), so one of them always sees the
// other, and only the one whose compare-and-swap wins calls stop.
type stay struct {
	state  atomic.Int32 // one of the stay… states
	closed atomic.Bool  // Close was called
	next   func() (struct{}, bool)
	stop   func()
	seq    iter.Seq[struct{}]

	// recv's system call, kept here so that it allocates nothing.
	msg     syscall.Msghdr
	iov     syscall.Iovec
	ctl     [4]uint64 // the TCP_CM_INQ control message (8-byte aligned)
	drained bool      // the last read left nothing to read: wait for the next edge
}

// tcpInq is TCP_INQ (the socket option) and TCP_CM_INQ (its control
// message): Linux 4.18 and later.
const tcpInq = 36

const (
	stayOut       int32 = iota // no raw read running: none yet, or it ended (an error, EOF)
	stayIn                     // the consumer is in pull: the coroutine reads or waits
	staySuspended              // the coroutine waits inside the raw read for pull to resume it
	stayStopped                // Close ended the coroutine (or is ending it): reads fail
)

// stayInside makes c read inside one raw read, in a coroutine, where the
// kernel says what a read left (TCP_INQ); otherwise c stays as it is.
func (c *sockReader) stayInside() {
	var err error
	if cerr := c.raw.Control(func(fd uintptr) {
		err = syscall.SetsockoptInt(int(fd), syscall.SOL_TCP, tcpInq, 1)
	}); cerr != nil || err != nil {
		return
	}
	c.stay = &stay{}
	c.stay.seq = c.reads
}

// reads is the coroutine: one raw read that yields after every read of
// the socket, until an error or EOF (yielded last) or until stopped.
// c.to and c.n, c.rerr, c.in pass between it and pull, one of the two
// running at a time.
func (c *sockReader) reads(yield func(struct{}) bool) {
	stopped := false
	err := c.raw.Read(func(fd uintptr) bool {
		for {
			if !c.readSocket(fd) {
				return false // nothing to read: wait for the next edge
			}
			if c.rerr != nil {
				return true
			}
			drained := c.stay.drained
			if !yield(struct{}{}) {
				stopped = true
				return true
			}
			if drained {
				// What arrives later raises an edge, which the wait
				// returns on (at once if it came while the consumer had
				// the bytes).
				return false
			}
		}
	})
	if stopped {
		return
	}
	if err != nil {
		c.n, c.rerr = 0, err
	}
	yield(struct{}{})
}

// pull is fill for a reader that stays inside one raw read: it resumes
// the coroutine (starting one when none runs) for one read.
func (c *sockReader) pull() (int, error) {
	st := c.stay
	if !st.state.CompareAndSwap(staySuspended, stayIn) {
		if st.state.Load() == stayStopped || st.closed.Load() {
			c.to = nil
			return 0, net.ErrClosed
		}
		st.next, st.stop = iter.Pull(st.seq)
		st.state.Store(stayIn)
	}
	st.next()
	c.to = nil
	if err := c.rerr; err != nil { // the raw read ended: so does the coroutine
		st.stop()
		st.next, st.stop = nil, nil
		st.state.Store(stayOut)
		return 0, err
	}
	st.state.Store(staySuspended)
	if st.closed.Load() && st.state.CompareAndSwap(staySuspended, stayStopped) {
		st.stop()
	}
	return c.n, nil
}

// leave ends the coroutine if it is suspended, before the socket is
// closed (see stay); a no-op for a reader without one.
func (c *sockReader) leave() {
	st := c.stay
	if st == nil {
		return
	}
	st.closed.Store(true)
	if st.state.CompareAndSwap(staySuspended, stayStopped) {
		st.stop()
	}
}

// kick shuts the socket's read side after a write failed (the peer reset
// the connection): a reader waiting for an edge that the reset's came
// before wakes and reads the end (see stay).
func (c *sockReader) kick() {
	if c.stay == nil {
		return
	}
	_ = c.raw.Control(func(fd uintptr) { _ = syscall.Shutdown(int(fd), syscall.SHUT_RD) })
}

// recv reads the socket into buf with recvmsg(2), and notes whether the
// read drained it (TCP_CM_INQ 0; without the control message it did not).
func (st *stay) recv(fd int, buf []byte) (int, error) {
	st.iov.Base = &buf[0]
	st.iov.SetLen(len(buf))
	st.msg.Iov = &st.iov
	st.msg.Iovlen = 1
	st.msg.Control = (*byte)(unsafe.Pointer(&st.ctl[0]))
	st.msg.SetControllen(int(unsafe.Sizeof(st.ctl)))
	r, _, e := syscall.Syscall(syscall.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(&st.msg)), 0)
	st.iov.Base = nil // holds no buffer while it waits
	st.drained = false
	if raceEnabled {
		// syscall.Read tells the race detector that what any goroutine
		// wrote to a descriptor before happened before the read (its
		// ioSync); a read of nothing, which the kernel answers at once,
		// tells it for recvmsg.
		_, _ = syscall.Read(fd, nil)
	}
	if e != 0 {
		return 0, e
	}
	if int(st.msg.Controllen) >= syscall.CmsgLen(4) {
		h := (*syscall.Cmsghdr)(unsafe.Pointer(&st.ctl[0]))
		if h.Level == syscall.SOL_TCP && h.Type == tcpInq {
			inq := *(*int32)(unsafe.Add(unsafe.Pointer(&st.ctl[0]), syscall.CmsgLen(0)))
			st.drained = inq == 0
		}
	}
	return int(r), nil
}
