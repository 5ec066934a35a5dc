package wsbuf

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/gobwas/ws"

	"github.com/turnstile-gw/turnstile/internal/evloop"
)

// Client is a dialled WebSocket connection (Dial), framed with
// github.com/gobwas/ws's low-level API: the gateway's upstream to its model.
// It keeps no buffer of its own between messages: a frame is written from
// a pooled chunk, masked there, and a reader waiting for its next message
// over plain TCP (Wait) waits for the socket to be readable holding none.
// On Linux that wait stays inside one raw read across messages, so that a
// message costs one read system call, not a read that finds the socket
// empty and then the read that gets it (stay_linux.go). Over TLS, TLS
// keeps the buffers it needs (and on an event loop, the plaintext it
// decrypted for the fast path while a message is not whole: loop_tls.go).
//
// One goroutine reads (Wait, Next, Read); writes may come from any
// goroutine and are serialised by the one lock a frame costs, which the
// reader's pongs and close replies take too. Close may be called at any
// time, by anyone.
type Client struct {
	sock net.Conn // the TCP connection: Close, write deadlines
	conn net.Conn // frames go through it: sock, or TLS over sock

	// On an event loop (DialOptions.Loop): the socket, sock (and conn
	// over plain TCP; over TLS, tl has the tls.Conn the loop feeds).
	lc     *evloop.Conn
	tl     *tlsLoop
	take   FastFunc        // the owner's fast path; the reader's
	fastFn evloop.FastFunc // fastFrames over take, made once

	// Reading, by one goroutine at a time.
	lean  *sockReader   // over plain TCP (unix): reads holding no buffer while waiting; else nil
	pre   *bufio.Reader // bytes the handshake read past the response; nil once drained
	rerr  error         // what Wait's read failed with, for the next read
	limit int64         // the largest message read
	left  int64         // payload bytes of the current data frame still to read
	size  int64         // bytes of the current message so far
	fin   bool          // the current data frame is its message's last
	inMsg bool          // Next found a message whose end Read has not reached
	rhdr  [ws.MaxHeaderSize - 2]byte
	ctl   [ws.MaxControlFramePayloadSize]byte // a control frame's payload

	// Writing, under wmu.
	frameWriter
	timeout time.Duration
	until   time.Time // the write deadline set on the socket
}

// CloseError is a close frame received: its code (1005 when it had none)
// and reason.
type CloseError struct {
	Code   int
	Reason string
}

func (e *CloseError) Error() string {
	return "websocket: received close frame: " + strconv.Itoa(e.Code) + " " + strconv.Quote(e.Reason)
}

// ErrMessageTooBig is what Next and Read return for a message longer than
// the read limit; the connection is then unusable.
var ErrMessageTooBig = errors.New("websocket: message exceeds the read limit")

// Wait waits, holding no buffer, until the connection has bytes for the
// next message, unless it has some already; the reader calls it between
// messages (after Read returned io.EOF, before Next), on its own shallow
// stack rather than deep in a frame-header read. Over TLS off an event
// loop it returns at once. A read error is the next read's.
func (c *Client) Wait() {
	if c.lc != nil {
		if c.take != nil && c.rerr == nil && !c.inMsg && (c.tl == nil || !c.tl.settle()) {
			c.lc.Wait(c.fastFn) // the fast path takes what it can first (loop.go, loop_tls.go)
		}
		return
	}
	if c.lean == nil || c.pre != nil || c.rerr != nil || c.inMsg || c.lean.in != nil {
		return
	}
	if _, err := c.lean.fill(); err != nil {
		c.rerr = err
	}
}

// Next reads up to the start of the next data message (text or binary),
// answering pings and skipping pongs on the way; Read then reads the
// message. A close frame is answered and returned as a *CloseError.
func (c *Client) Next() error {
	for {
		h, err := c.header(0)
		if err != nil {
			return err
		}
		if h.OpCode.IsControl() {
			if err := c.control(h); err != nil {
				return err
			}
			continue
		}
		if h.Length > c.limit {
			return c.tooBig()
		}
		c.left, c.size, c.fin, c.inMsg = h.Length, h.Length, h.Fin, true
		return nil
	}
}

// Read reads the message Next found, its continuation frames reassembled
// and control frames between them handled; io.EOF at its end.
func (c *Client) Read(p []byte) (int, error) {
	for c.left == 0 {
		if !c.inMsg || c.fin {
			c.inMsg = false
			return 0, io.EOF
		}
		h, err := c.header(ws.StateFragmented)
		if err != nil {
			return 0, err
		}
		if h.OpCode.IsControl() {
			if err := c.control(h); err != nil {
				return 0, err
			}
			continue
		}
		if h.Length > c.limit-c.size {
			return 0, c.tooBig()
		}
		c.left, c.fin = h.Length, h.Fin
		c.size += h.Length
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, err := c.src(p[:min(int64(len(p)), c.left)])
	c.left -= int64(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// header reads and checks the next frame's header.
func (c *Client) header(state ws.State) (ws.Header, error) {
	h, err := ws.ReadHeaderBuffer(reader{c}, c.rhdr[:])
	if err != nil {
		return h, err
	}
	if err := ws.CheckHeader(h, ws.StateClientSide|state); err != nil {
		c.writeClose(ws.StatusProtocolError, "")
		return h, err
	}
	return h, nil
}

// control handles a control frame whose header was just read: a ping is
// answered with a pong, a pong skipped, a close answered with a close
// frame of the same code and returned as a *CloseError.
func (c *Client) control(h ws.Header) error {
	p := c.ctl[:h.Length]
	if err := readFull(reader{c}, p); err != nil {
		return err
	}
	switch h.OpCode {
	case ws.OpPing:
		_ = c.write(ws.OpPong, p) // a failed write is the next send's error
		return nil
	case ws.OpPong:
		return nil
	}
	ce, err := peerClose(p)
	if err != nil {
		c.writeClose(ws.StatusProtocolError, "")
		return err
	}
	if ce.Code == int(ws.StatusNoStatusRcvd) {
		c.writeClose(0, "")
	} else {
		c.writeClose(ws.StatusCode(ce.Code), "")
	}
	return ce
}

// tooBig ends reading with ErrMessageTooBig, telling the peer (1009).
func (c *Client) tooBig() error {
	c.writeClose(ws.StatusMessageTooBig, "")
	return fmt.Errorf("%w (%d bytes)", ErrMessageTooBig, c.limit)
}

// writeClose writes a close frame, code 0 meaning one without a code;
// an error is left for the next send.
func (c *Client) writeClose(code ws.StatusCode, reason string) {
	var p []byte
	if code != 0 {
		p = c.ctl[:2+len(reason)]
		ws.PutCloseFrameBody(p, code, reason)
	}
	_ = c.write(ws.OpClose, p)
}

// reader is the connection's byte stream under the frames.
type reader struct{ c *Client }

func (r reader) Read(p []byte) (int, error) { return r.c.src(p) }

// src reads the bytes under the frames: first those the handshake read
// past its response, then the socket's (holding no buffer while it waits
// over plain TCP).
func (c *Client) src(p []byte) (int, error) {
	if c.pre != nil {
		n, err := c.pre.Read(p)
		if c.pre.Buffered() == 0 {
			ws.PutReader(c.pre)
			c.pre = nil
		}
		return n, err
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

// WriteText writes p as one text message. p is not changed: the frame is
// masked in a pooled chunk, in one write for a frame of up to a chunk, a
// write a chunk for a longer one. A write that fails (the write timeout,
// the peer gone) fails every later one with the same error.
func (c *Client) WriteText(p []byte) error { return c.write(ws.OpText, p) }

func (c *Client) write(op ws.OpCode, p []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return c.werr
	}
	err := c.writeFrame(op, p)
	if err != nil && c.lean != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		c.lean.kick() // a reset the reader may not wake for (stay_linux.go)
	}
	return c.sent(op, err)
}

// writeFrame writes one frame, masked with a fresh key; c.wmu is held.
//
// The write deadline is moved only when less than the timeout of it is
// left, to twice the timeout ahead: setting it re-arms a runtime timer,
// and audio is written 50 times a second. Every write still gets at least
// the timeout.
func (c *Client) writeFrame(op ws.OpCode, p []byte) error {
	if now := time.Now(); c.timeout > 0 && c.until.Sub(now) < c.timeout {
		until := now.Add(2 * c.timeout)
		if err := c.sock.SetWriteDeadline(until); err != nil {
			return err
		}
		c.until = until
	}
	h := ws.Header{Fin: true, OpCode: op, Length: int64(len(p)), Masked: true}
	mask := rand.Uint32()
	h.Mask = [4]byte{byte(mask), byte(mask >> 8), byte(mask >> 16), byte(mask >> 24)}
	bp := chunks.Get().(*[]byte)
	defer chunks.Put(bp)
	out, err := c.head(bp, h)
	if err != nil {
		return err
	}
	for off := 0; ; {
		k := copy(out[len(out):cap(out)], p[off:])
		seg := out[len(out) : len(out)+k]
		ws.Cipher(seg, h.Mask, off)
		if _, err := c.conn.Write(out[:len(out)+k]); err != nil {
			return err
		}
		off += k
		if off == len(p) {
			return nil
		}
		out = out[:0]
	}
}

// Close closes the connection at once, without a close frame (the peer
// sees it drop): a blocked read or write returns. Over TLS the TCP
// connection is closed, not TLS, whose close_notify a full socket buffer
// would hold up; on an event loop, where a write never waits, TLS is
// closed with its close_notify.
func (c *Client) Close() error {
	if c.tl != nil {
		return c.tl.close()
	}
	if c.lean != nil {
		c.lean.closeStay() // a reader suspended inside its raw read would hold the close up
	}
	return c.sock.Close()
}
