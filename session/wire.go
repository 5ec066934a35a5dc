package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/wsbuf"
)

// Wire is the client end of a connection as a session sees it: browser
// protocol messages in and out, pings, and how it closes. The browser's
// WebSocket is one; a phone call is another — a bridge (package telephony)
// that speaks its carrier's media stream on one side and the browser
// protocol to the session on the other.
//
// Read is called by one goroutine, Write by another; Close, CloseNow and
// Ping may come from any.
type Wire interface {
	// Read reads the next message into buf (grown when needed; the result
	// may alias it). Its errors read as coder/websocket's
	// (websocket.CloseStatus tells a close from a failure, and 1009 a
	// message over the read limit), but for errIdleRead (a browser's,
	// after a pong): nothing was read, and the next Read waits for the
	// next frame.
	Read(buf []byte) (binary bool, data []byte, err error)
	// Write sends one message, a binary one (model audio) or a JSON event.
	Write(binary bool, data []byte) error
	// Close ends the connection with a close code and reason, after what
	// was written has gone out.
	Close(code int, reason string) error
	// CloseNow drops the connection at once.
	CloseNow() error
	// Ping checks the other end is alive; it returns when it answered.
	Ping(ctx context.Context) error
}

// WebSocketWire is a coder/websocket connection as a Wire (a phone
// bridge reads its carrier's WebSocket through one). Reads and writes run
// without a context of their own (a context per frame costs an
// allocation per audio frame): the connection is dropped to end them.
func WebSocketWire(ws *websocket.Conn) Wire { return wsWire{ws: ws} }

// wsWire is a coder/websocket connection.
type wsWire struct{ ws *websocket.Conn }

func (w wsWire) Read(buf []byte) (bool, []byte, error) {
	typ, r, err := w.ws.Reader(context.Background())
	if err != nil {
		return false, nil, err
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return typ == websocket.MessageBinary, buf, nil
		}
		if err != nil {
			return false, nil, err
		}
	}
}

func (w wsWire) Write(binary bool, data []byte) error {
	typ := websocket.MessageText
	if binary {
		typ = websocket.MessageBinary
	}
	return w.ws.Write(context.Background(), typ, data)
}

func (w wsWire) Close(code int, reason string) error {
	return w.ws.Close(websocket.StatusCode(code), reason)
}

func (w wsWire) CloseNow() error                { return w.ws.CloseNow() }
func (w wsWire) Ping(ctx context.Context) error { return w.ws.Ping(ctx) }

// readBuf is a browser wire's read buffer, held from a frame's arrival to
// the next Read: between frames (an idle browser) nothing is held. A
// frame larger than a pooled buffer grows one that the connection keeps
// (a browser that sends large audio frames sends more of them).
type readBuf struct {
	held *[]byte // from readBufs, for the frame last read
	big  []byte
}

// readBufs are the browser readers' buffers.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 0, readBufferSize); return &b }}

// take is the buffer for the frame that has arrived.
func (b *readBuf) take() []byte {
	if b.big != nil {
		return b.big[:0]
	}
	b.held = readBufs.Get().(*[]byte)
	return (*b.held)[:0]
}

// read is done with buf: one grown past the pooled size is kept.
func (b *readBuf) read(buf []byte) {
	if cap(buf) > readBufferSize && b.big == nil {
		b.big = buf
		b.release()
	}
}

// release gives the pooled buffer back.
func (b *readBuf) release() {
	if b.held != nil {
		readBufs.Put(b.held)
		b.held = nil
	}
}

// browserWire is a browser's WebSocket (accepted with wsbuf.Accept) as a
// Wire, with what it reads with, in one allocation: its read buffer and
// its reader's hooks. Its CloseNow closes the socket, and nothing else
// may (the connection has no raw conn): a reader staying inside its raw
// read (micReads) would hold a close of the socket up. The ping frames it reads count toward the message
// rate (hooks.allow, set before the reader starts), and after a pong with
// nothing behind it its Read says errIdleRead, for the reader to wait for
// the next frame on a stack of its own (conn.serve).
type browserWire struct {
	ws    *wsbuf.ServerConn
	rb    readBuf
	hooks readerHooks
}

// newBrowserWire is ws as a Wire; its hooks are bound to the connection's
// message rate before its reader starts.
func newBrowserWire(ws *wsbuf.ServerConn, readLimit int64) (*browserWire, *readerHooks) {
	w := &browserWire{ws: ws}
	ws.SetReadLimit(readLimit)
	ws.SetHooks(&w.hooks)
	return w, &w.hooks
}

// readerHooks is what a browser connection's reader asks of the session,
// on the reader's goroutine: allow takes a ping frame against the
// connection's message rate like a text message, and over it the ping is
// not answered (a flood of them is told rate_limited and closed 4008 as a
// flood of messages is). allow is set before the reader starts
// (allowMessage requires the reader goroutine).
type readerHooks struct {
	allow func(now time.Time) bool
}

// AllowPing is wsbuf.Hooks'.
func (h *readerHooks) AllowPing() bool {
	return h.allow == nil || h.allow(clock.Wall.Now())
}

// idleWaiter is a wire whose Read may say errIdleRead (a browser's):
// waitIdle waits for the next frame, for a caller that waits on a
// shallower stack (conn.readOn).
type idleWaiter interface{ waitIdle() }

func (w *browserWire) waitIdle() { w.ws.Wait() }

// errIdleRead is what a browser wire's Read returns when its connection
// had nothing to read after a pong (wsbuf.ErrIdle): nothing was read, and
// the reader waits for the next frame (waitIdle) before it reads on.
var errIdleRead = errors.New("session: nothing to read")

// Read reads into the wire's own buffer (see readBuf), valid until the
// next Read; buf is not used.
func (w *browserWire) Read([]byte) (bool, []byte, error) {
	w.rb.release()
	binary, err := w.ws.Next()
	if err != nil {
		return false, nil, browserReadErr(err)
	}
	buf, err := w.ws.ReadBody(w.rb.take())
	if err != nil {
		w.rb.release()
		return false, nil, browserReadErr(err)
	}
	w.rb.read(buf)
	return binary, buf, nil
}

// browserReadErr is a read error as coder/websocket's would read: a close
// frame received as a websocket.CloseError, a message over the limit as
// one with 1009 (what the browser was told).
func browserReadErr(err error) error {
	var ce *wsbuf.CloseError
	switch {
	case errors.Is(err, wsbuf.ErrIdle):
		return errIdleRead
	case errors.As(err, &ce):
		return websocket.CloseError{Code: websocket.StatusCode(ce.Code), Reason: ce.Reason}
	case errors.Is(err, wsbuf.ErrMessageTooBig):
		return fmt.Errorf("%w: %w", websocket.CloseError{Code: websocket.StatusMessageTooBig}, err)
	}
	return err
}

// micReads has the browser's reader read once per message while the
// session is in voice (wsbuf.ServerConn.StayInside: on Linux, a read
// system call a message instead of two, for a coroutine of 3–4.5 KB of RSS);
// the reader calls it for each microphone frame the voice side took.
// voiceOff undoes it when the session leaves voice, and the close ends
// it: an idle or text session's reader is one goroutine, as before voice.
// A voiceOff that raced with a StayInside (the frame read before voice
// ended, the move made before it) is made again here.
//
// With event loops (Manager.Loops) the socket moves to one instead, for
// the rest of the connection (onLoop, loop.go); StayInside stays the way
// where it cannot (TLS, not Linux).
func (c *conn) micReads(s *session) {
	w, ok := c.wire.(*browserWire)
	if !ok || c.onLoop(w) {
		return
	}
	if w.ws.StayInside() && s.voiceSide() == nil {
		w.ws.Leave()
	}
}

// voiceOff is outbound's: the session left voice (voiceEnded, after the
// voice side is gone): the browser's reader goes back to its ordinary
// reads, at once if it waits (wsbuf.ServerConn.Leave).
func (c *conn) voiceOff() {
	if w, ok := c.wire.(*browserWire); ok {
		w.ws.Leave()
	}
}

func (w *browserWire) Write(binary bool, data []byte) error { return w.ws.Write(binary, data) }
func (w *browserWire) Close(code int, reason string) error  { return w.ws.Close(code, reason) }
func (w *browserWire) CloseNow() error                      { return w.ws.CloseNow() }
func (w *browserWire) Ping(ctx context.Context) error       { return w.ws.Ping(ctx) }
