package wsbuf

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/gobwas/ws"
)

// What a dialled connection (Client) and an accepted one (ServerConn)
// share: how a frame's writes are serialised and fail for good, how its
// header goes into the chunk that carries it, and how a peer's control
// frame and close are read.

// frameWriter serialises a connection's frames (one uncontended lock a
// frame) and remembers the write that ended them.
type frameWriter struct {
	wmu  sync.Mutex
	werr error // a write failed, or the close frame went: every later one fails with it
	whdr [ws.MaxHeaderSize]byte
	hw   headerWriter
}

// ErrCloseSent is what a write returns once the connection has sent its
// close frame (answering the peer's, or ending on a protocol error or an
// oversized message).
var ErrCloseSent = errors.New("websocket: the close frame was sent")

// sent records how the frame of op went (err, from the caller's
// writeFrame) and returns err; w.wmu is held. A failed write fails every
// later one, and nothing may follow a close frame (RFC 6455 §5.5.1).
func (w *frameWriter) sent(op ws.OpCode, err error) error {
	if err != nil {
		w.werr = err
		return err
	}
	if op == ws.OpClose {
		w.werr = ErrCloseSent
	}
	return nil
}

// head writes h into the pooled chunk bp, which will carry the frame, and
// returns the chunk up to it; w.wmu is held.
func (w *frameWriter) head(bp *[]byte, h ws.Header) ([]byte, error) {
	w.hw.b = (*bp)[:0]
	err := ws.WriteHeaderBuffer(&w.hw, h, w.whdr[:])
	out := w.hw.b
	w.hw.b = nil
	return out, err
}

// headerWriter takes what ws.WriteHeaderBuffer writes into the chunk that
// carries the frame.
type headerWriter struct{ b []byte }

func (w *headerWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// readFull reads a whole frame's part (a control frame's payload); a
// stream that ends first is io.ErrUnexpectedEOF.
func readFull(r io.Reader, p []byte) error {
	_, err := io.ReadFull(r, p)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// peerClose reads a close frame's payload p: the peer's close (1005 for
// one without a code), or an error for a frame no peer may send, which
// the caller answers with a protocol error (1002).
func peerClose(p []byte) (*CloseError, error) {
	if len(p) == 0 {
		return &CloseError{Code: int(ws.StatusNoStatusRcvd)}, nil
	}
	code, reason := ws.ParseCloseFrameData(p)
	if len(p) < 2 || !wireCloseCode(code) {
		return nil, fmt.Errorf("websocket: received a close frame with the invalid code %d", code)
	}
	return &CloseError{Code: int(code), Reason: reason}, nil
}

// wireCloseCode reports whether a close frame may carry code (RFC 6455
// §7.4): 1000–1014 but for 1004–1006, which never go on the wire, and the
// registered and private ranges 3000–4999. (ws.CheckCloseFrameData would
// refuse 1012–1014, which servers send when restarting or overloaded.)
func wireCloseCode(code ws.StatusCode) bool {
	switch {
	case code >= 1004 && code <= 1006:
		return false
	case code >= 1000 && code <= 1014, code >= 3000 && code <= 4999:
		return true
	}
	return false
}
