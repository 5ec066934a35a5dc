// Package wsbuf holds a WebSocket's buffers only while a frame is in
// flight. An accepted coder/websocket connection otherwise keeps the HTTP
// server's 4 KiB read buffer and a 4 KiB write buffer for its whole life,
// which is most of what an idle session costs.
//
// ServerConn (Accept) is a browser's WebSocket, framed with
// github.com/gobwas/ws: it holds no buffer between messages, and its
// reader waits for the next frame outside any frame-header read (Wait).
//
// ResponseWriter (for a coder/websocket server connection: a phone
// carrier's media stream) wraps the handler's http.ResponseWriter before
// websocket.Accept; the library's Hijack then gets, over a plain TCP
// connection, a connection whose reads wait for data without a buffer and
// take a pooled one only to read what has arrived, and whose writes go out
// in one system call each as before, and 16- and 128-byte buffers for the
// library's own bufio layer. The connection must not negotiate compression
// (coder/websocket's default): see leanConn.Write.
//
// Client is the dialling side: a dialled WebSocket (the gateway's upstream to
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
	return lc, bufio.NewReadWriter(bufio.NewReaderSize(lc, readBufioSize), bufio.NewWriterSize(lc, heldSize)), nil
}

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
