//go:build unix

package wsbuf

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// readResult is one Conn.Reader call on the server: the message read
// whole, or the error.
type readResult struct {
	typ  websocket.MessageType
	data string
	err  error
}

// idleServer accepts through ResponseWriter with OnPongReceived arming
// Park, and reads as a session does: Wait, then Reader, each result sent
// to results. parked gets what each Park reported. srv is the server's
// WebSocket, for a test that closes it.
type idleServer struct {
	results chan readResult
	parked  chan bool
	srv     chan *websocket.Conn
	url     string
}

func newIdleServer(t *testing.T) *idleServer {
	s := &idleServer{results: make(chan readResult, 16), parked: make(chan bool, 16), srv: make(chan *websocket.Conn, 1)}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lw := &ResponseWriter{ResponseWriter: w}
		var idle *Idle
		ws, err := websocket.Accept(lw, r, &websocket.AcceptOptions{
			OnPongReceived: func(context.Context, []byte) { s.parked <- idle.Park() },
		})
		if err != nil {
			return
		}
		defer func() { _ = ws.CloseNow() }()
		idle = lw.Idle()
		if idle == nil {
			s.results <- readResult{err: errors.New("a plain TCP connection was not made lean")}
			return
		}
		s.srv <- ws
		for {
			idle.Wait()
			typ, rd, err := ws.Reader(context.Background())
			if err != nil {
				s.results <- readResult{err: err}
				if errors.Is(err, ErrIdle) {
					continue
				}
				return
			}
			var b strings.Builder
			_, err = bufio.NewReader(rd).WriteTo(&b)
			s.results <- readResult{typ: typ, data: b.String(), err: err}
		}
	}))
	t.Cleanup(hs.Close)
	s.url = hs.URL
	return s
}

// rawClient is a WebSocket client written by hand, so that a test decides
// how frames fall into TCP writes.
func rawClient(t *testing.T, url string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	req := "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := c.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade answered %s", resp.Status)
	}
	return c, br
}

// clientFrame is one masked client frame (mask key zero: the payload goes
// as is), fin set.
func clientFrame(opcode byte, payload string) []byte {
	b := []byte{0x80 | opcode}
	switch n := len(payload); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	default:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	}
	b = append(b, 0, 0, 0, 0)
	return append(b, payload...)
}

const (
	opText  = 0x1
	opClose = 0x8
	opPong  = 0xA
)

func write(t *testing.T, c net.Conn, frames ...[]byte) {
	t.Helper()
	var b []byte
	for _, f := range frames {
		b = append(b, f...)
	}
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
}

// After a pong with nothing behind it, the library's Reader returns
// ErrIdle instead of waiting for the next frame inside itself; the reader
// waits in Wait, and the next message comes whole.
func TestReaderReturnsIdleAfterAPongWithNothingBehindIt(t *testing.T) {
	s := newIdleServer(t)
	c, _ := rawClient(t, s.url)
	s.pongThenWait(t, c)
	write(t, c, clientFrame(opText, "hello"))
	if r := <-s.results; r.err != nil || r.typ != websocket.MessageText || r.data != "hello" {
		t.Fatalf("the message after the wait: %+v", r)
	}
}

// Bytes that arrived with the pong are the next frame: they never wait
// (Park does not arm, Reader returns the message). A frame whose header
// is cut after the pong comes whole whichever way the reads fall.
func TestBytesBufferedBehindAPongNeverWait(t *testing.T) {
	s := newIdleServer(t)
	c, _ := rawClient(t, s.url)
	long := strings.Repeat("x", 300) // a 4-byte header: cut inside it below
	write(t, c, clientFrame(opPong, "p1"), clientFrame(opText, "at once"))
	if <-s.parked {
		t.Fatal("Park armed with the next frame buffered")
	}
	if r := <-s.results; r.err != nil || r.data != "at once" {
		t.Fatalf("the message behind the pong: %+v", r)
	}
	next := clientFrame(opText, long)
	write(t, c, clientFrame(opPong, "p2"), next[:2])
	<-s.parked
	write(t, c, next[2:])
	for {
		r := <-s.results
		if errors.Is(r.err, ErrIdle) {
			continue // the cut came in a read of its own after the pong
		}
		if r.err != nil || r.data != long {
			t.Fatalf("the frame cut after the pong: %d bytes, %v", len(r.data), r.err)
		}
		break
	}
}

// A close handshake from another goroutine while the reader waits in
// Wait reads the peer's close frame and completes; the reader then gets
// the library's close error. (Run with -race: the two read the
// connection one at a time.)
func TestCloseHandshakeCompletesWhileTheReaderWaits(t *testing.T) {
	s := newIdleServer(t)
	c, br := rawClient(t, s.url)
	ws := <-s.srv
	s.pongThenWait(t, c)
	closed := make(chan error, 1)
	go func() { closed <- ws.Close(websocket.StatusGoingAway, "bye") }()
	// The server's close frame: answer it as a browser does.
	h := make([]byte, 2)
	if _, err := io.ReadFull(br, h); err != nil {
		t.Fatal(err)
	}
	if h[0] != 0x80|opClose {
		t.Fatalf("server sent opcode %#x, want a close frame", h[0])
	}
	payload := make([]byte, h[1]&0x7f)
	if _, err := io.ReadFull(br, payload); err != nil {
		t.Fatal(err)
	}
	if code := binary.BigEndian.Uint16(payload); code != uint16(websocket.StatusGoingAway) {
		t.Fatalf("close code %d", code)
	}
	write(t, c, clientFrame(opClose, string(payload)))
	if err := <-closed; err != nil {
		t.Fatalf("the close handshake: %v", err)
	}
	if r := <-s.results; r.err == nil || errors.Is(r.err, ErrIdle) {
		t.Fatalf("the waiting reader after the close: %+v, want the close", r)
	}
}

// Dropping the connection ends the wait.
func TestCloseNowEndsTheWait(t *testing.T) {
	s := newIdleServer(t)
	c, _ := rawClient(t, s.url)
	ws := <-s.srv
	s.pongThenWait(t, c)
	_ = ws.CloseNow()
	if r := <-s.results; r.err == nil || errors.Is(r.err, ErrIdle) {
		t.Fatalf("the waiting reader after CloseNow: %+v, want an error", r)
	}
}

// pongThenWait sends a pong with nothing behind it: Park arms, the
// library's Reader returns ErrIdle, and the reader waits in Wait.
func (s *idleServer) pongThenWait(t *testing.T, c net.Conn) {
	t.Helper()
	write(t, c, clientFrame(opPong, "p1"))
	if !<-s.parked {
		t.Fatal("Park did not arm after a pong with nothing buffered")
	}
	if r := <-s.results; !errors.Is(r.err, ErrIdle) {
		t.Fatalf("Reader after a pong: %+v, want ErrIdle", r)
	}
	waitInWait(t)
}

// waitInWait waits until a goroutine waits for the socket in Idle.Wait,
// outside the library.
func waitInWait(t *testing.T) {
	t.Helper()
	testwait.For(t, "the reader to wait in Idle.Wait", func() bool {
		for _, g := range testwait.Stacks() {
			if strings.Contains(g, "wsbuf.(*Idle).Wait(") && strings.Contains(g, "(*pollDesc).waitRead") &&
				!strings.Contains(g, "coder/websocket") {
				return true
			}
		}
		return false
	})
}
