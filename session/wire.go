package session

import (
	"context"
	"errors"
	"io"
	"net"
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
	// (websocket.CloseStatus tells a close from a failure), but for
	// errIdleRead (a browser's, after a pong): nothing was read, and the
	// next Read waits for the next frame.
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

// WebSocketWire is a WebSocket as a Wire (a phone bridge reads its
// carrier's WebSocket through one).
func WebSocketWire(ws *websocket.Conn) Wire { return wsWire{ws: ws, ctx: context.Background()} }

// wsWire is a browser's WebSocket. Reads and writes run without a context
// of their own (a context per frame costs an allocation per audio frame):
// the connection is dropped to end them. Reads run on ctx, made once,
// which carries the reader's hooks to OnPing and OnPong.
type wsWire struct {
	ws   *websocket.Conn
	ctx  context.Context
	rb   *readBuf    // a browser's: Read uses it, not the caller's buffer
	idle *wsbuf.Idle // a lean browser connection's (OnPong)
}

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

// browserWire is the WebSocket of a browser accepted with OnPing and
// OnPong, through hw (nil when not through wsbuf), and raw the network
// connection under it (nil when unknown): the ping frames it reads count
// toward the message rate, and a pong has its reader wait outside the
// library (see readerHooks).
func browserWire(ws *websocket.Conn, hw *wsbuf.ResponseWriter) (Wire, net.Conn, *readerHooks) {
	b := &browser{hooks: hooksCtx{Context: context.Background()}}
	h := &b.hooks.h
	var raw net.Conn
	if hw != nil {
		raw, h.idle = hw.Conn, hw.Idle()
	}
	b.wire = wsWire{ws: ws, ctx: &b.hooks, rb: &b.rb, idle: h.idle}
	return &b.wire, raw, h
}

// browser is a browser's wire with what it reads with — the read context
// that carries its hooks, its read buffer — in one allocation (four
// small ones otherwise, for as long as the connection lives).
type browser struct {
	wire  wsWire
	hooks hooksCtx
	rb    readBuf
}

// hooksCtx is a browser wire's read context: its hooks as the value of
// readerHooksKey.
type hooksCtx struct {
	context.Context
	h readerHooks
}

func (c *hooksCtx) Value(key any) any {
	if key == (readerHooksKey{}) {
		return &c.h
	}
	return c.Context.Value(key)
}

// readerHooks is what the library's OnPingReceived and OnPongReceived
// reach of a browser connection. They are called only inside the reader's
// Read, where the library handles control frames: on the reader goroutine,
// under the library's read lock. (A close handshake reads the peer's last
// frames on another goroutine, with a context of its own: they find no
// hooks there.)
//
// allow is set before the reader starts (allowMessage requires the
// reader goroutine). idle, when the connection is lean (wsbuf), is armed
// at each pong: an idle browser's reader otherwise stays parked 18 frames
// deep inside the library's header read after the first pong it reads,
// with the stack that took (see conn.serve).
type readerHooks struct {
	allow func(now time.Time) bool
	idle  *wsbuf.Idle
}

type readerHooksKey struct{}

// OnPing is the websocket.AcceptOptions.OnPingReceived of browser
// connections: a ping frame is taken against the connection's message
// rate like a text message, and over it it is not answered (a flood of
// them is told rate_limited and closed 4008 as a flood of messages is).
// Other WebSockets (no hooks in ctx) are answered as usual.
func OnPing(ctx context.Context, _ []byte) bool {
	h, ok := ctx.Value(readerHooksKey{}).(*readerHooks)
	if !ok || h.allow == nil {
		return true
	}
	return h.allow(clock.Wall.Now())
}

// OnPong is the websocket.AcceptOptions.OnPongReceived of browser
// connections: the library's read that follows a pong (the next frame's
// header) returns wsbuf.ErrIdle instead of waiting, when nothing is
// buffered, so that the reader waits for the next frame outside the
// library (wsWire.Read).
func OnPong(ctx context.Context, _ []byte) {
	if h, ok := ctx.Value(readerHooksKey{}).(*readerHooks); ok && h.idle != nil {
		h.idle.Park()
	}
}

// idleWaiter is a wire whose Read may say errIdleRead (a lean browser
// connection's): waitIdle waits for the next frame, as the next Read
// would, for a caller that waits on a shallower stack (conn.readOn).
type idleWaiter interface{ waitIdle() }

func (w wsWire) waitIdle() { w.idle.Wait() }

// errIdleRead is what a browser wire's Read returns when its connection
// had nothing to read after a pong (wsbuf.ErrIdle): nothing was read, and
// the next Read waits for the next frame before it enters the library.
var errIdleRead = errors.New("session: nothing to read")

// Read reads into buf, or for a browser into its own buffer (see readBuf),
// valid until the next Read.
func (w wsWire) Read(buf []byte) (bool, []byte, error) {
	if w.rb != nil {
		w.rb.release()
	}
	if w.idle != nil {
		w.idle.Wait() // after errIdleRead: here, not in the library
	}
	typ, r, err := w.ws.Reader(w.ctx)
	if err != nil {
		if errors.Is(err, wsbuf.ErrIdle) {
			return false, nil, errIdleRead
		}
		return false, nil, err
	}
	if w.rb != nil {
		buf = w.rb.take()
		defer func() { w.rb.read(buf) }()
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
