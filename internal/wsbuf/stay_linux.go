//go:build linux && !386

package wsbuf

import (
	"errors"
	"iter"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// A reader that stays inside one raw read: the dialled side's (Client),
// for its whole life, and the accepted side's (ServerConn) while its owner
// asks it to (StayInside, Leave: a browser's, while its session is in
// voice).
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
// fails, which shuts the read side (Client.write, ServerConn.write: kick),
// or until Close.
//
// The reader's consumer pulls (Wait, Next, Read), so the raw read runs in
// a coroutine (iter.Pull): it yields after each read and is resumed for
// the next, a direct switch between the two rather than the scheduler's
// wake of a parked goroutine. The coroutine is a goroutine of its own
// (3–4.5 KB of RSS with its stack) while it lives, which is why a browser's
// reader stays inside only while audio streams: an idle browser's reader
// is one goroutine and holds no buffer (ServerConn.Wait).
//
// Closing: a suspended coroutine holds the socket's read lock, and closing
// the socket waits until no read holds it. So Close (closeStay) first ends
// a suspended coroutine; one the consumer is running ends on the socket's
// close (a waiting raw read returns net.ErrClosed), or, if it yields
// first, the consumer sees the close and ends it. Both mark before they
// look (sequentially consistent atomics), so one of them always sees the
// other, and only the one whose compare-and-swap wins calls stop. Every
// close of a ServerConn's socket goes through CloseNow for this reason.
//
// Leaving (a server's): the reader itself ends the coroutine between two
// reads (exit: its next fill, once Leave asked, or the close handshake's
// drain). A reader waiting inside the raw read when Leave comes is woken by
// a read deadline in the past, set under wmu while the state says the
// read is the consumer's (stayWaking); the consumer, back from the
// coroutine, finds that state, waits for wmu (the deadline is then set)
// and clears the deadline before anything else reads: a deadline error
// there is no error, and the fill reads as an ordinary one.
type stay struct {
	state  atomic.Int32 // one of the stay… states
	closed atomic.Bool  // Close was called
	on     atomic.Bool  // fills resume the coroutine; else each is its own raw read
	leave  atomic.Bool  // Leave asked the reader to go back to ordinary reads
	wmu    sync.Mutex   // held by wake while it sets the deadline that wakes a read
	sock   net.Conn     // the socket's deadlines (wake); nil for a Client's
	next   func() (struct{}, bool)
	stop   func()
	seq    iter.Seq[struct{}]

	// recv's system call, kept here so that it allocates nothing.
	msg     syscall.Msghdr
	iov     syscall.Iovec
	ctl     [4]uint64 // the TCP_CM_INQ control message (8-byte aligned)
	drained bool      // the last read left nothing to read: wait for the next edge
}

// noStay is the stay of a reader that never stays inside: the kernel has
// no TCP_INQ, or it was closed before it would have.
var noStay = &stay{}

// tcpInq is TCP_INQ (the socket option) and TCP_CM_INQ (its control
// message): Linux 4.18 and later.
const tcpInq = 36

const (
	stayOut       int32 = iota // no raw read running: none yet, it ended (an error, EOF), or the reader left
	stayIn                     // the consumer is in pull: the coroutine reads or waits
	staySuspended              // the coroutine waits inside the raw read for pull to resume it
	stayStopped                // Close ended the coroutine (or is ending it): reads fail
	stayWaking                 // in pull still, and Leave set a read deadline to end the wait (wake)
	stayBusy                   // pull has the coroutine's result: neither Close nor Leave touches it
)

// aLongTimeAgo is a read deadline that ends a wait at once.
var aLongTimeAgo = time.Unix(1, 0)

// newStay is a stay for c, with TCP_INQ set on its socket; nil where the
// kernel has none.
func (c *sockReader) newStay() *stay {
	var err error
	if cerr := c.raw.Control(func(fd uintptr) {
		err = syscall.SetsockoptInt(int(fd), syscall.SOL_TCP, tcpInq, 1)
	}); cerr != nil || err != nil {
		return nil
	}
	st := &stay{}
	st.seq = c.reads
	return st
}

// stayInside makes c read inside one raw read, in a coroutine, where the
// kernel says what a read left (TCP_INQ); otherwise c stays as it is (a
// Client's, before its first read).
func (c *sockReader) stayInside() {
	if st := c.newStay(); st != nil {
		st.on.Store(true)
		c.stay.Store(st)
	}
}

// stayOn is c's stay when fills go through it; else nil.
func (c *sockReader) stayOn() *stay {
	if st := c.stay.Load(); st != nil && st.on.Load() {
		return st
	}
	return nil
}

// settled reports whether enter has nothing to do: c stays inside with no
// Leave pending, or never can.
func (c *sockReader) settled() bool {
	st := c.stay.Load()
	return st == noStay || st != nil && st.on.Load() && !st.leave.Load()
}

// enter has c stay inside one raw read from its next fill, until a Leave
// (wake) or exit; sock is the socket, for wake's deadline. Called by the
// reader, between reads; it reports whether c was not staying inside
// before (a Leave pending counts as not), for the owner to check it still
// wants it (see ServerConn.StayInside).
func (c *sockReader) enter(sock net.Conn) bool {
	st := c.stay.Load()
	if st == nil {
		if st = c.newStay(); st == nil {
			st = noStay
		} else {
			st.sock = sock
		}
		if !c.stay.CompareAndSwap(nil, st) {
			st = c.stay.Load() // closeStay's noStay
		}
	}
	if st == noStay || st.closed.Load() || st.on.Load() && !st.leave.Load() {
		return false
	}
	st.leave.Store(false)
	st.on.Store(true)
	return true
}

// exit ends the coroutine, if suspended, and has the fills read as
// ordinary ones; called by the reader, between reads.
func (c *sockReader) exit() {
	st := c.stay.Load()
	if st == nil || st == noStay {
		return
	}
	st.on.Store(false)
	if st.state.CompareAndSwap(staySuspended, stayOut) {
		st.stop()
		st.next, st.stop = nil, nil
	}
}

// wake asks the reader to leave (its next fill exits), and ends a wait
// inside the raw read that pull is in now; from any goroutine.
func (c *sockReader) wake() {
	st := c.stay.Load()
	if st == nil || st == noStay || st.leave.Swap(true) {
		return
	}
	st.wmu.Lock()
	defer st.wmu.Unlock()
	if st.state.CompareAndSwap(stayIn, stayWaking) {
		_ = st.sock.SetReadDeadline(aLongTimeAgo)
	}
}

// reads is the coroutine: one raw read that yields after every read of
// the socket, until an error or EOF (yielded last) or until stopped.
// c.to and c.n, c.rerr, c.in pass between it and pull, one of the two
// running at a time.
func (c *sockReader) reads(yield func(struct{}) bool) {
	st := c.stay.Load()
	stopped := false
	err := c.raw.Read(func(fd uintptr) bool {
		for {
			if !c.readSocket(fd) {
				return false // nothing to read: wait for the next edge
			}
			if c.rerr != nil {
				return true
			}
			drained := st.drained
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
// the coroutine (starting one when none runs) for one read. left: the
// reader left instead (a Leave, see stay), nothing read, and the fill is
// an ordinary one.
func (c *sockReader) pull(st *stay) (n int, left bool, err error) {
	if st.leave.Load() {
		c.exit()
		return 0, true, nil
	}
	if !st.state.CompareAndSwap(staySuspended, stayIn) {
		if st.state.Load() == stayStopped || st.closed.Load() {
			c.to = nil
			return 0, false, net.ErrClosed
		}
		st.next, st.stop = iter.Pull(st.seq)
		st.state.Store(stayIn)
	}
	// A Leave that came after the check above found no read to wake (the
	// state was not stayIn yet): look again now that it is. Either this
	// sees the Leave or the Leave sees stayIn (both mark before they
	// look); if both, one compare-and-swap wins: here, the reader leaves
	// without waiting; in wake, its deadline ends the wait below.
	if st.leave.Load() && st.state.CompareAndSwap(stayIn, staySuspended) {
		c.exit()
		return 0, true, nil
	}
	st.next()
	c.to = nil
	woken := !st.state.CompareAndSwap(stayIn, stayBusy)
	if woken { // stayWaking: the deadline is set once wmu is free
		st.wmu.Lock()
		_ = st.sock.SetReadDeadline(time.Time{})
		st.wmu.Unlock()
		st.state.Store(stayBusy)
	}
	if err := c.rerr; err != nil { // the raw read ended: so does the coroutine
		st.stop()
		st.next, st.stop = nil, nil
		st.state.Store(stayOut)
		if woken && errors.Is(err, os.ErrDeadlineExceeded) {
			c.rerr = nil
			return 0, true, nil
		}
		return 0, false, err
	}
	st.state.Store(staySuspended)
	if st.closed.Load() && st.state.CompareAndSwap(staySuspended, stayStopped) {
		st.stop()
	}
	return c.n, false, nil
}

// closeStay ends the coroutine if it is suspended, before the socket is
// closed (see stay), and keeps one from starting; from any goroutine.
func (c *sockReader) closeStay() {
	st := c.stay.Load()
	if st == nil {
		if c.stay.CompareAndSwap(nil, noStay) {
			return
		}
		st = c.stay.Load()
	}
	if st == noStay {
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
	if c.stayOn() == nil {
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
