package wsbuf

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gobwas/ws"

	"github.com/turnstile-gw/turnstile/internal/evloop"
)

// ServerConn is an accepted WebSocket (Accept): a browser's, framed with
// github.com/gobwas/ws's low-level API. Like Client it keeps no buffer
// of its own between messages: over plain TCP its reader waits for the
// socket to be readable holding none, and reads what has arrived into a
// pooled chunk only then; a frame is written in one system call, its
// header and payload from a pooled chunk (or, for a payload larger than
// one, the payload where it is, with writev).
//
// One goroutine reads (Next, ReadBody, Wait); writes (Write, Ping,
// Close) may come from any goroutine and are serialised by the one lock
// a frame costs, which the reader's pongs and close replies take too.
// CloseNow may be called at any time, by anyone.
//
// After a pong, with nothing more buffered, Next returns ErrIdle rather
// than wait for the next frame inside its header read: the reader then
// waits with Wait on a stack of its own (an idle browser's reader, see
// session's conn.serve).
//
// While its owner asks (StayInside, until Leave: a browser streaming its
// microphone), the reader stays inside one raw read on Linux, as Client's
// does, so that a message costs one read system call rather than two, for
// a coroutine of its own while it stays (stay_linux.go).
type ServerConn struct {
	sock  net.Conn // the TCP connection: CloseNow, the close handshake's read deadline
	conn  net.Conn // as hijacked (TLS, or a wrapper): frames are read through it unless lean
	wconn net.Conn // frames are written to it: the socket under conn when lean, else conn
	sub   string
	hooks Hooks

	// On an event loop (Attach): lc is the socket's, set by the reader with
	// rmu, wmu and smu held; loopc says so to anyone. Over TLS, tl has the
	// tls.Conn (conn, wconn) the loop feeds. under is the connection as
	// accepted (a wrapper's accounting), closed with lc.
	lc     *evloop.Conn
	tl     *tlsLoop
	under  net.Conn
	loopc  atomic.Pointer[evloop.Conn]
	take   FastFunc        // the owner's fast path; the reader's
	fastFn evloop.FastFunc // fastFrames over take, made once
	smu    sync.Mutex      // held by Attach's move and by CloseNow: the socket closed is the one that serves

	// Reading, under rmu: the reader's, or a Close's that waits for the
	// peer's close frame while no reader is at it.
	rmu    sync.Mutex
	lean   *sockReader // over plain TCP (unix): reads holding no buffer while waiting; else nil
	pend   []byte      // bytes the HTTP server read past the request, when not lean
	rerr   error       // what Wait's read failed with, for the next read
	rend   error       // the reading has ended with it: every later read returns it
	limit  int64       // the largest message read
	left   int64       // payload bytes of the current data frame still to read
	size   int64       // bytes of the current message so far
	fin    bool        // the current data frame is its message's last
	inMsg  bool        // Next found a message whose end ReadBody has not reached
	parked bool        // a pong was read: Next returns ErrIdle if nothing is buffered
	mask   [4]byte     // the current data frame's
	moff   int         // its payload's offset, for unmasking
	rhdr   [ws.MaxHeaderSize - 2]byte
	ctl    [ws.MaxControlFramePayloadSize]byte // a control frame's payload

	// Writing, under wmu.
	frameWriter

	// The ping out and the reading's end, under pmu.
	pmu      sync.Mutex
	pings    uint64        // the last ping's number, its payload
	pong     chan struct{} // closed when the last ping is answered or the reading ends
	answered uint64        // the last ping answered
	ended    bool          // the reading has ended (rend)
	endc     chan struct{} // closed when it ends; made by a Close waiting for it
}

// Hooks is what a ServerConn's reader asks its owner, on the reader's
// goroutine.
type Hooks interface {
	// AllowPing reports whether a ping frame is answered (a pong); a
	// browser's pings count toward its message rate.
	AllowPing() bool
}

// ErrIdle is what Next returns after a pong when nothing more has arrived
// (over plain TCP): nothing was read, and the reader waits with Wait.
var ErrIdle = errors.New("wsbuf: nothing has arrived; wait with Wait")

// closeWait bounds how long Close waits for the peer's close frame, as
// coder/websocket's Close does.
const closeWait = 5 * time.Second

// DefaultReadLimit is a ServerConn's largest message until SetReadLimit
// (coder/websocket's default).
const DefaultReadLimit = 32 << 10

// SetReadLimit sets the largest message read (0: keep the current one,
// DefaultReadLimit at first); a longer one fails with ErrMessageTooBig,
// the peer told 1009. Call it before reading.
func (c *ServerConn) SetReadLimit(n int64) {
	if n > 0 {
		c.limit = n
	}
}

// SetHooks sets the reader's hooks; call it before reading.
func (c *ServerConn) SetHooks(h Hooks) { c.hooks = h }

// Subprotocol is the subprotocol Accept chose ("" for none).
func (c *ServerConn) Subprotocol() string { return c.sub }

// Conn is the TCP connection (under TLS for wss): its addresses. End the
// WebSocket with CloseNow, not by closing it: a reader staying inside its
// raw read (StayInside) holds the socket, and a close waits for it.
func (c *ServerConn) Conn() net.Conn { return c.sock }

// Wait waits, holding no buffer, until the connection has bytes for the
// next message, unless it has some already; the reader calls it after
// Next returned ErrIdle, on a stack of its own. Over TLS it returns at
// once. A read error is the next read's.
func (c *ServerConn) Wait() {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if !c.drained() || c.rend != nil || c.inMsg {
		return
	}
	if _, err := c.lean.fill(); err != nil {
		c.rerr = err
	}
}

// StayInside has the reader stay inside one raw read from its next read
// (Linux, plain TCP: see stay_linux.go): one read system call a message
// rather than two, for a coroutine of its own (3–4.5 KB of RSS) until Leave or
// the close. The reader calls it, between messages. It reports whether
// the reader was not staying inside (or had a Leave pending): a caller
// whose Leave may have raced with it then checks it still wants it, and
// calls Leave if not. Cheap when there is nothing to do (two atomic loads).
func (c *ServerConn) StayInside() bool {
	if c.lean == nil || c.lean.settled() {
		return false
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.rend != nil {
		return false
	}
	return c.lean.enter(c.wconn)
}

// Leave has the reader go back to ordinary reads after StayInside, its
// coroutine ended before its next read, or at once if it waits for one;
// from any goroutine.
func (c *ServerConn) Leave() {
	c.smu.Lock()
	lean := c.lean
	c.smu.Unlock()
	if lean != nil {
		lean.wake()
	}
}

// drained reports whether nothing is buffered and a read of the lean
// socket would wait.
func (c *ServerConn) drained() bool {
	return c.lean != nil && c.lean.in == nil && len(c.pend) == 0 && c.rerr == nil
}

// Next reads up to the start of the next data message and reports whether
// it is binary (else text), answering pings and taking pongs on the way;
// ReadBody then reads it. A close frame is answered and returned as a
// *CloseError; after a pong it may return ErrIdle.
func (c *ServerConn) Next() (binary bool, err error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.rend != nil {
		return false, c.rend
	}
	for {
		if c.parked {
			c.parked = false
			if c.drained() {
				return false, ErrIdle
			}
		}
		if c.lc != nil && c.take != nil && (c.tl == nil || !c.tl.settle()) {
			c.lc.Wait(c.fastFn) // the fast path takes what it can first (loop.go, loop_tls.go)
		}
		h, err := c.header(0)
		if err != nil {
			return false, c.fail(err)
		}
		if h.OpCode.IsControl() {
			if err := c.control(h); err != nil {
				return false, c.fail(err)
			}
			continue
		}
		if h.Length > c.limit {
			return false, c.fail(c.tooBig())
		}
		c.left, c.size, c.fin, c.inMsg = h.Length, h.Length, h.Fin, true
		c.mask, c.moff = h.Mask, 0
		return h.OpCode == ws.OpBinary, nil
	}
}

// ReadBody reads the message Next found, its continuation frames
// reassembled and control frames between them handled, appended to
// buf[:0] (grown to the frame's length when it is short).
func (c *ServerConn) ReadBody(buf []byte) ([]byte, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.rend != nil {
		return nil, c.rend
	}
	buf = buf[:0]
	for {
		if c.left == 0 {
			if !c.inMsg || c.fin {
				c.inMsg = false
				return buf, nil
			}
			if err := c.continuation(); err != nil {
				return nil, c.fail(err)
			}
			continue
		}
		room := readRoom(len(buf), cap(buf), c.left)
		buf = slices.Grow(buf, room)
		p := buf[len(buf) : len(buf)+room]
		n, err := c.src(p)
		ws.Cipher(p[:n], c.mask, c.moff)
		c.moff += n
		c.left -= int64(n)
		buf = buf[:len(buf)+n]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, c.fail(err)
		}
	}
}

// readRoom is how much of a frame's left bytes the next read takes into
// a buffer of length n and capacity c: all of them when the buffer has the
// room, else at most as much again as it holds (a chunk at least), so that
// a header claiming a large frame reserves memory only as its bytes
// arrive, not all at once before any (a peer that then sends nothing
// would hold it until its connection ends).
func readRoom(n, c int, left int64) int {
	return int(min(left, int64(max(c-n, n, chunkSize))))
}

// continuation reads up to the next frame of the current message.
func (c *ServerConn) continuation() error {
	for {
		h, err := c.header(ws.StateFragmented)
		if err != nil {
			return err
		}
		if h.OpCode.IsControl() {
			if err := c.control(h); err != nil {
				return err
			}
			continue
		}
		if h.Length > c.limit-c.size {
			return c.tooBig()
		}
		c.left, c.fin = h.Length, h.Fin
		c.size += h.Length
		c.mask, c.moff = h.Mask, 0
		return nil
	}
}

// fail ends the reading with err (a close frame's *CloseError, a
// protocol error, the socket's) and tells a Close and a Ping waiting.
func (c *ServerConn) fail(err error) error {
	c.rend = err
	c.pmu.Lock()
	defer c.pmu.Unlock()
	c.ended = true
	if c.endc != nil {
		close(c.endc)
		c.endc = nil
	}
	if c.pong != nil {
		close(c.pong)
		c.pong = nil
	}
	return err
}

// header reads and checks the next frame's header: a client's frames are
// masked; a protocol error is told the peer (1002).
func (c *ServerConn) header(state ws.State) (ws.Header, error) {
	h, err := ws.ReadHeaderBuffer(serverSrc{c}, c.rhdr[:])
	if err != nil {
		if err == io.EOF && state != 0 {
			err = io.ErrUnexpectedEOF
		}
		return h, err
	}
	if err := ws.CheckHeader(h, ws.StateServerSide|state); err != nil {
		c.writeClose(int(ws.StatusProtocolError), err.Error())
		return h, err
	}
	return h, nil
}

// control handles a control frame whose header was just read: a ping is
// answered with a pong (if the hooks allow it), a pong ends the Ping
// waiting for it and parks the reader, a close is answered with a close
// frame of the same code and reason (unless this side sent its own
// first) and returned as a *CloseError.
func (c *ServerConn) control(h ws.Header) error {
	p := c.ctl[:h.Length]
	if err := readFull(serverSrc{c}, p); err != nil {
		return err
	}
	ws.Cipher(p, h.Mask, 0)
	switch h.OpCode {
	case ws.OpPing:
		if c.hooks == nil || c.hooks.AllowPing() {
			_ = c.write(ws.OpPong, p) // a failed write is the next send's error
		}
		return nil
	case ws.OpPong:
		c.pongRead(p)
		c.parked = c.lean != nil
		return nil
	}
	ce, err := peerClose(p)
	if err != nil {
		c.writeClose(int(ws.StatusProtocolError), "invalid close frame")
		return err
	}
	c.writeClose(ce.Code, ce.Reason) // 1005: a close frame without a code
	return ce
}

// pongRead ends the Ping waiting for this pong.
func (c *ServerConn) pongRead(p []byte) {
	if len(p) != 8 {
		return
	}
	id := binary.BigEndian.Uint64(p)
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if c.pong != nil && id == c.pings {
		c.answered = id
		close(c.pong)
		c.pong = nil
	}
}

// tooBig ends reading with ErrMessageTooBig, telling the peer (1009).
func (c *ServerConn) tooBig() error {
	c.writeClose(int(ws.StatusMessageTooBig), fmt.Sprintf("read limited at %d bytes", c.limit))
	return fmt.Errorf("%w (%d bytes)", ErrMessageTooBig, c.limit)
}

// serverSrc is the connection's byte stream under the frames.
type serverSrc struct{ c *ServerConn }

func (r serverSrc) Read(p []byte) (int, error) { return r.c.src(p) }

// src reads the bytes under the frames: first those the HTTP server read
// past the request, then the socket's.
func (c *ServerConn) src(p []byte) (int, error) {
	if len(c.pend) > 0 {
		n := copy(p, c.pend)
		if c.pend = c.pend[n:]; len(c.pend) == 0 {
			c.pend = nil
		}
		return n, nil
	}
	if c.rerr != nil {
		err := c.rerr
		c.rerr = nil
		return 0, err
	}
	if c.lean != nil {
		return c.lean.Read(p)
	}
	if c.tl != nil {
		return c.tl.read(p)
	}
	return c.conn.Read(p)
}

// Write writes p as one message, binary or text.
func (c *ServerConn) Write(binary bool, p []byte) error {
	op := ws.OpText
	if binary {
		op = ws.OpBinary
	}
	return c.write(op, p)
}

func (c *ServerConn) write(op ws.OpCode, p []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return c.werr
	}
	err := c.writeFrame(op, p)
	if err != nil && c.lean != nil {
		c.lean.kick() // a reset a reader staying inside may not wake for (stay_linux.go)
	}
	return c.sent(op, err)
}

// frameVec is a large frame's writev: its header and its payload.
type frameVec struct {
	parts [2][]byte
	bufs  net.Buffers
}

var frameVecs = sync.Pool{New: func() any { return new(frameVec) }}

// writeFrame writes one unmasked frame in one system call; c.wmu is held.
// Writes have no deadline: the owner drops the connection (CloseNow) to
// end one that is stuck.
func (c *ServerConn) writeFrame(op ws.OpCode, p []byte) error {
	h := ws.Header{Fin: true, OpCode: op, Length: int64(len(p))}
	bp := chunks.Get().(*[]byte)
	defer chunks.Put(bp)
	out, err := c.head(bp, h)
	if err != nil {
		return err
	}
	if len(out)+len(p) <= cap(out) {
		_, err := c.wconn.Write(append(out, p...))
		return err
	}
	v := frameVecs.Get().(*frameVec)
	v.parts = [2][]byte{out, p}
	v.bufs = v.parts[:]
	_, err = v.bufs.WriteTo(c.wconn)
	v.parts, v.bufs = [2][]byte{}, nil
	frameVecs.Put(v)
	return err
}

// writeClose writes a close frame with code and reason (the reason cut to
// fit); an error is left for the next send.
func (c *ServerConn) writeClose(code int, reason string) { _ = c.sendClose(code, reason) }

func (c *ServerConn) sendClose(code int, reason string) error {
	if code == int(ws.StatusNoStatusRcvd) {
		return c.write(ws.OpClose, nil)
	}
	reason = cutReason(reason)
	p := make([]byte, 2+len(reason))
	ws.PutCloseFrameBody(p, ws.StatusCode(code), reason)
	return c.write(ws.OpClose, p)
}

// cutReason cuts a close reason to what a close frame holds (123 bytes),
// at a character's start: a reason that is not UTF-8 fails the browser's
// connection (it reports 1006, not the code it was sent).
func cutReason(reason string) string {
	n := ws.MaxControlFramePayloadSize - 2
	if len(reason) <= n {
		return reason
	}
	for n > 0 && !utf8.RuneStart(reason[n]) {
		n--
	}
	return reason[:n]
}

// Ping sends a ping and waits for its pong, the reading's end (the
// connection closed: net.ErrClosed) or ctx's; one Ping at a time.
func (c *ServerConn) Ping(ctx context.Context) error {
	c.pmu.Lock()
	if c.ended {
		c.pmu.Unlock()
		return net.ErrClosed
	}
	if c.pong != nil {
		close(c.pong) // an earlier Ping's: it gives up
	}
	c.pings++
	id, pong := c.pings, make(chan struct{})
	c.pong = pong
	c.pmu.Unlock()
	var p [8]byte
	binary.BigEndian.PutUint64(p[:], id)
	if err := c.write(ws.OpPing, p[:]); err != nil {
		return err
	}
	select {
	case <-pong:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if c.answered != id {
		return net.ErrClosed
	}
	return nil
}

// Close sends a close frame with code and reason, waits (at most 5 s) for
// the peer's — read by the reader, or here when no reader is at it — and
// closes the connection.
func (c *ServerConn) Close(code int, reason string) error {
	err := c.sendClose(code, reason)
	if err != nil && !errors.Is(err, ErrCloseSent) {
		_ = c.CloseNow()
		return err
	}
	c.waitClose()
	return c.CloseNow()
}

// waitClose waits for the reading to end (the peer's close frame, or the
// connection's end), at most closeWait.
func (c *ServerConn) waitClose() {
	if c.rmu.TryLock() {
		defer c.rmu.Unlock()
		c.drain()
		return
	}
	c.pmu.Lock()
	if c.ended {
		c.pmu.Unlock()
		return
	}
	if c.endc == nil {
		c.endc = make(chan struct{})
	}
	end := c.endc
	c.pmu.Unlock()
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-end:
	case <-t.C:
	}
}

// drain reads, as no reader is at it, up to the peer's close frame (what
// comes before it is dropped), at most closeWait; c.rmu is held.
func (c *ServerConn) drain() {
	if c.rend != nil {
		return
	}
	if c.lean != nil {
		c.lean.exit() // the deadline below is the drain's, not a Leave's
	}
	_ = c.sock.SetReadDeadline(time.Now().Add(closeWait))
	for {
		for c.left > 0 {
			n, err := c.src(c.ctl[:min(c.left, int64(len(c.ctl)))])
			c.left -= int64(n)
			if err != nil {
				c.fail(err)
				return
			}
		}
		h, err := ws.ReadHeaderBuffer(serverSrc{c}, c.rhdr[:])
		if err != nil {
			c.fail(err)
			return
		}
		if h.OpCode != ws.OpClose || h.Length > int64(len(c.ctl)) {
			c.left = h.Length
			continue
		}
		p := c.ctl[:h.Length]
		if _, err := io.ReadFull(serverSrc{c}, p); err != nil {
			c.fail(err)
			return
		}
		ws.Cipher(p, h.Mask, 0)
		ce := &CloseError{Code: int(ws.StatusNoStatusRcvd)}
		if len(p) >= 2 {
			code, reason := ws.ParseCloseFrameData(p)
			ce.Code, ce.Reason = int(code), reason
		}
		c.fail(ce)
		return
	}
}

// CloseNow closes the connection at once, without a close frame (the
// peer sees it drop): a blocked read or write returns. Over TLS the TCP
// connection is closed, not TLS. Close the connection only through it (not
// Conn's Close): a reader staying inside its raw read would hold that up.
func (c *ServerConn) CloseNow() error {
	c.smu.Lock()
	defer c.smu.Unlock()
	if c.lean != nil {
		c.lean.closeStay()
	}
	err := c.sock.Close()
	if c.under != nil {
		_ = c.under.Close()
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}
