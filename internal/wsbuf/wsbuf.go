// Package wsbuf holds a server WebSocket's buffers only while a frame is in
// flight. An accepted coder/websocket connection otherwise keeps the HTTP
// server's 4 KiB read buffer and a 4 KiB write buffer for its whole life,
// which is most of what an idle session costs.
//
// ResponseWriter wraps the handler's http.ResponseWriter before
// websocket.Accept; the library's Hijack then gets, over a plain TCP
// connection, a connection whose reads wait for data without a buffer and
// take a pooled one only to read what has arrived, and whose writes go out
// in one system call each as before, and 16- and 128-byte buffers for the
// library's own bufio layer. The connection must not negotiate compression
// (coder/websocket's default): see leanConn.Write.
//
// Client is the other side: a dialled WebSocket (the gateway's upstream to
// its model) framed with github.com/gobwas/ws, which holds no buffer
// between messages either and waits for the next one outside any
// frame-header read (Client.Wait).
package wsbuf

import (
	"bufio"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
)

// ResponseWriter is an http.ResponseWriter whose Hijack hands the
// WebSocket library a lean connection. Conn is the network connection
// taken over, once hijacked (the TCP connection under TLS): closing it
// ends the WebSocket at once, however stuck.
type ResponseWriter struct {
	http.ResponseWriter
	Conn net.Conn
	lean *leanConn // what the library got; nil when not lean
}

// Hijack takes the connection over from the HTTP server. Over TLS the
// connection is returned as the server gave it (TLS keeps buffers of its
// own).
func (w *ResponseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("http.ResponseWriter does not implement http.Hijacker")
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		return c, brw, err
	}
	w.Conn = c
	if tc, ok := c.(*tls.Conn); ok {
		// Closing a TLS connection first writes a close_notify, which a
		// full socket buffer holds up for seconds; the session drops the
		// TCP connection under it instead.
		w.Conn = tc.NetConn()
		return c, brw, nil
	}
	lc, ok := newLeanConn(c, brw.Reader)
	if !ok {
		return c, brw, nil
	}
	w.lean = lc
	lc.br = bufio.NewReaderSize(lc, readBufioSize)
	return lc, bufio.NewReadWriter(lc.br, bufio.NewWriterSize(lc, heldSize)), nil
}

// Idle is the hijacked connection's parking (see Idle); nil when it was
// not made lean (TLS, or no socket under it).
func (w *ResponseWriter) Idle() *Idle {
	if w.lean == nil {
		return nil
	}
	return &Idle{c: w.lean}
}

// ErrIdle is what the library's read returns, instead of waiting inside
// the library, once Idle.Park has armed it: the connection has nothing
// buffered at a frame boundary. The library passes it up (wrapped) from
// Conn.Reader without reading anything or changing its state; the
// reader then waits with Idle.Wait and calls Reader again.
var ErrIdle = errors.New("wsbuf: nothing has arrived; wait with Idle.Wait")

// Idle lets a WebSocket's reader wait for the next frame on a shallow
// stack of its own instead of 18 frames deep in coder/websocket's header
// read, where an idle connection's reader otherwise stays (and with it
// the stack that grew to get there: 4 KiB rather than 2). The library's
// read loop goes on to the next frame header after a control frame
// without returning; Park, from the library's OnPongReceived, has the
// header read that follows return ErrIdle when nothing is buffered.
type Idle struct{ c *leanConn }

// Unwrapper is a net.Conn wrapper that passes bytes through unchanged
// (one that counts or tracks connections) and gives the connection under
// it, so that a lean connection can read and write the socket directly.
// (A *tls.Conn is not one: it is returned as the server gave it.)
type Unwrapper interface {
	Unwrap() net.Conn
}

// chunkSize is a pooled buffer: what one read takes from the socket, and
// the most a dialled connection writes at once (Client).
const chunkSize = 4 << 10

var chunks = sync.Pool{New: func() any { b := make([]byte, chunkSize); return &b }}

// readBufioSize is the library's read buffer: bufio's smallest. Reads of
// a frame's header go through it; payloads are read straight into the
// library's buffer, or copied from the pooled chunk that holds them.
const readBufioSize = 16
