//go:build unix

package wsbuf

import (
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/gobwas/ws"

	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// readResult is one read on the server: the message whole, or the error.
type readResult struct {
	binary bool
	data   string
	err    error
}

// idleServer reads as a session does: Next, and after ErrIdle Wait; each
// result goes to results (ErrIdle included). srv is the server's
// connection, for a test that closes it or looks at what it holds.
type idleServer struct {
	results chan readResult
	srv     chan *ServerConn
	url     string
}

func newIdleServer(t *testing.T) *idleServer {
	s := &idleServer{results: make(chan readResult, 16), srv: make(chan *ServerConn, 1)}
	s.url = acceptServer(t, func(c *ServerConn) {
		if c.lean == nil {
			s.results <- readResult{err: errors.New("a plain TCP connection reads no lean socket")}
			return
		}
		s.srv <- c
		for {
			binary, err := c.Next()
			if errors.Is(err, ErrIdle) {
				s.results <- readResult{err: err}
				c.Wait()
				continue
			}
			var data []byte
			if err == nil {
				data, err = c.ReadBody(nil)
			}
			s.results <- readResult{binary: binary, data: string(data), err: err}
			if err != nil {
				return
			}
		}
	})
	return s
}

// After a pong with nothing behind it, Next returns ErrIdle instead of
// waiting inside a frame-header read; the reader waits in Wait, on its own
// stack and holding no read chunk, and the next message comes whole.
func TestReaderWaitsOutsideAHeaderReadAfterAPong(t *testing.T) {
	s := newIdleServer(t)
	c, _ := rawClient(t, s.url)
	srv := <-s.srv
	s.pongThenWait(t, c)
	if srv.lean.in != nil {
		t.Fatal("the waiting reader holds a read chunk")
	}
	write(t, c, clientFrame(ws.OpText, true, "hello"))
	if r := <-s.results; r.err != nil || r.binary || r.data != "hello" {
		t.Fatalf("the message after the wait: %+v", r)
	}
}

// Bytes that arrived with the pong are the next frame: they never wait.
// A frame whose header is cut after the pong comes whole.
func TestBytesBufferedBehindAPongNeverWait(t *testing.T) {
	s := newIdleServer(t)
	c, _ := rawClient(t, s.url)
	<-s.srv
	write(t, c, clientFrame(ws.OpPong, true, "p1"), clientFrame(ws.OpText, true, "at once"))
	if r := <-s.results; r.err != nil || r.data != "at once" {
		t.Fatalf("the message behind the pong: %+v", r)
	}
	long := strings.Repeat("x", 300) // a 4-byte header: cut inside it below
	next := clientFrame(ws.OpText, true, long)
	s.pongThenWait(t, c)
	write(t, c, next[:2])
	write(t, c, next[2:])
	if r := <-s.results; r.err != nil || r.data != long {
		t.Fatalf("the frame cut after the pong: %d bytes, %v", len(r.data), r.err)
	}
}

// A Close from another goroutine while the reader waits in Wait completes
// its handshake (the reader reads the browser's close frame); the reader
// then has the browser's close. (Run with -race: the two never read the
// connection at once.)
func TestCloseHandshakeCompletesWhileTheReaderWaits(t *testing.T) {
	s := newIdleServer(t)
	c, br := rawClient(t, s.url)
	srv := <-s.srv
	s.pongThenWait(t, c)
	closed := make(chan error, 1)
	go func() { closed <- srv.Close(1001, "bye") }()
	h, p := readServerFrame(t, br)
	if h.OpCode != ws.OpClose || binary.BigEndian.Uint16([]byte(p)) != 1001 {
		t.Fatalf("the server sent %v %q, want close 1001", h.OpCode, p)
	}
	write(t, c, clientFrame(ws.OpClose, true, p))
	if err := <-closed; err != nil {
		t.Fatalf("the close handshake: %v", err)
	}
	var ce *CloseError
	if r := <-s.results; !errors.As(r.err, &ce) || ce.Code != 1001 {
		t.Fatalf("the waiting reader after the close: %+v, want the browser's close", r)
	}
}

// Dropping the connection ends the wait.
func TestCloseNowEndsTheWait(t *testing.T) {
	s := newIdleServer(t)
	c, _ := rawClient(t, s.url)
	srv := <-s.srv
	s.pongThenWait(t, c)
	_ = srv.CloseNow()
	if r := <-s.results; r.err == nil || errors.Is(r.err, ErrIdle) {
		t.Fatalf("the waiting reader after CloseNow: %+v, want an error", r)
	}
}

// pongThenWait sends a pong with nothing behind it: Next returns ErrIdle,
// and the reader waits in Wait.
func (s *idleServer) pongThenWait(t *testing.T, c net.Conn) {
	t.Helper()
	write(t, c, clientFrame(ws.OpPong, true, "p"))
	if r := <-s.results; !errors.Is(r.err, ErrIdle) {
		t.Fatalf("Next after a pong: %+v, want ErrIdle", r)
	}
	testwait.For(t, "the reader to wait for the socket in Wait, outside a header read", func() bool {
		for _, g := range testwait.Stacks() {
			if strings.Contains(g, "wsbuf.(*ServerConn).Wait(") && strings.Contains(g, "(*pollDesc).waitRead") &&
				!strings.Contains(g, "ReadHeader") {
				return true
			}
		}
		return false
	})
}
