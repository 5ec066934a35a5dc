package session

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/internal/clock"
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
	// (websocket.CloseStatus tells a close from a failure).
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
// which carries the ping gate to OnPing.
type wsWire struct {
	ws  *websocket.Conn
	ctx context.Context
	rb  *readBuf // a browser's: Read uses it, not the caller's buffer
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

// browserWire is the WebSocket of a browser accepted with OnPing: the ping
// frames it reads count toward the message rate (see pingGate).
func browserWire(ws *websocket.Conn) (wsWire, *pingGate) {
	g := &pingGate{}
	return wsWire{ws: ws, ctx: context.WithValue(context.Background(), pingGateKey{}, g), rb: &readBuf{}}, g
}

// pingGate lets OnPing reach the connection's message rate. Its allow is
// set before the reader starts and called only inside the reader's Read,
// where the library handles control frames: on the reader goroutine, as
// allowMessage requires.
type pingGate struct{ allow func(now time.Time) bool }

type pingGateKey struct{}

// OnPing is the websocket.AcceptOptions.OnPingReceived of browser
// connections: a ping frame is taken against the connection's message
// rate like a text message, and over it it is not answered (a flood of
// them is told rate_limited and closed 4008 as a flood of messages is).
// Other WebSockets (no gate in ctx) are answered as usual.
func OnPing(ctx context.Context, _ []byte) bool {
	g, ok := ctx.Value(pingGateKey{}).(*pingGate)
	if !ok || g.allow == nil {
		return true
	}
	return g.allow(clock.Wall.Now())
}

// Read reads into buf, or for a browser into its own buffer (see readBuf),
// valid until the next Read.
func (w wsWire) Read(buf []byte) (bool, []byte, error) {
	if w.rb != nil {
		w.rb.release()
	}
	typ, r, err := w.ws.Reader(w.ctx)
	if err != nil {
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
