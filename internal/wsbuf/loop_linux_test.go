//go:build linux

package wsbuf

import (
	"bufio"
	"errors"
	"net"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gobwas/ws"

	"github.com/turnstile-gw/turnstile/internal/evloop"
)

func testLoop(t testing.TB) *evloop.Loop {
	t.Helper()
	p, err := evloop.NewPool(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p.Loop(0)
}

// log is what a fast path took and what the reader read, in order.
type log struct {
	mu  sync.Mutex
	got []string
}

func (l *log) add(s string) {
	l.mu.Lock()
	l.got = append(l.got, s)
	l.mu.Unlock()
}

func (l *log) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got)
}

// A Client on an event loop hands whole messages to its fast path while
// its reader waits; a message the fast path does not take, a fragmented
// one, and a ping go to the reader, and the two see the messages in the
// order they came. The ping is answered; writes reach the server.
func TestClientOnALoopGivesItsFastPathWhatItTakesAndTheReaderTheRestInOrder(t *testing.T) {
	pong := make(chan string, 1)
	heard := make(chan string, 1)
	url := rawWS(t, func(c net.Conn, br *bufio.Reader) {
		var b []byte
		for _, f := range []ws.Frame{
			frameOf(ws.OpText, true, "a1"), frameOf(ws.OpText, true, "a2"), frameOf(ws.OpPing, true, "p"),
			frameOf(ws.OpText, true, "b1"), frameOf(ws.OpText, true, "a3"),
			frameOf(ws.OpText, false, "a"), frameOf(ws.OpContinuation, true, "4"), frameOf(ws.OpBinary, true, "a5"),
		} {
			fb, _ := ws.CompileFrame(f)
			b = append(b, fb...)
		}
		if _, err := c.Write(b); err != nil {
			return
		}
		for range 2 {
			h, p, err := readClientFrame(br)
			if err != nil {
				return
			}
			if h.OpCode == ws.OpPong {
				pong <- string(p)
			} else {
				heard <- string(p)
			}
		}
		fb, _ := ws.CompileFrame(ws.NewCloseFrame(ws.NewCloseFrameBody(ws.StatusNormalClosure, "bye")))
		_, _ = c.Write(fb)
		_, _, _ = readClientFrame(br)
	})
	c := clientDial(t, url, DialOptions{Loop: testLoop(t)})
	if !c.OnLoop() {
		t.Fatal("the client is not on the loop")
	}
	var l log
	c.SetFast(func(binary bool, p []byte) bool {
		if !strings.HasPrefix(string(p), "a") {
			return false
		}
		l.add("fast:" + string(p))
		return true
	})
	if err := c.WriteText([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	var err error
	for err == nil {
		var m []byte
		if m, err = readMessage(c); err == nil {
			l.add("read:" + string(m))
		}
	}
	var ce *CloseError
	if !errors.As(err, &ce) || ce.Code != 1000 || ce.Reason != "bye" {
		t.Fatalf("reading ended with %v; want the server's close 1000 bye", err)
	}
	want := []string{"fast:a1", "fast:a2", "read:b1", "fast:a3", "read:a4", "fast:a5"}
	if got := l.all(); !slices.Equal(got, want) {
		t.Fatalf("got %q; want %q", got, want)
	}
	if p := <-pong; p != "p" {
		t.Fatalf("pong %q", p)
	}
	if h := <-heard; h != "hi" {
		t.Fatalf("the server heard %q", h)
	}
}

// A ServerConn moved to an event loop between messages (with frames that
// came with the ones before it already read into its buffer) hands binary
// messages to its fast path, unmasked, and text ones, pings and the close
// to its reader, in order; its writes reach the client.
func TestServerConnAttachedToALoopGivesItsFastPathBinaryMessagesInOrder(t *testing.T) {
	loop := testLoop(t)
	var l log
	done := make(chan error, 1)
	url := acceptServer(t, func(c *ServerConn) {
		if _, data, err := serverRead(c); err != nil || string(data) != "start" {
			done <- errors.Join(errors.New("no start"), err)
			return
		}
		if err := c.Attach(loop, 0); err != nil {
			done <- err
			return
		}
		c.SetFast(func(binary bool, p []byte) bool {
			l.add("fast:" + string(p))
			return true
		})
		if err := c.Write(false, []byte("w1")); err != nil {
			done <- err
			return
		}
		for {
			_, data, err := serverRead(c)
			if err != nil {
				done <- err
				return
			}
			l.add("read:" + string(data))
		}
	})
	conn, br := rawClient(t, url, clientFrame(ws.OpText, true, "start"), clientFrame(ws.OpBinary, true, "m1"),
		clientFrame(ws.OpBinary, true, "m2"), clientFrame(ws.OpText, true, "t1"), clientFrame(ws.OpBinary, true, "m3"),
		clientFrame(ws.OpPing, true, "p"), clientFrame(ws.OpBinary, true, strings.Repeat("m4", 100)))
	if h, p := readServerFrame(t, br); h.OpCode != ws.OpText || p != "w1" {
		t.Fatalf("client read %v %q; want the text w1", h.OpCode, p)
	}
	if h, p := readServerFrame(t, br); h.OpCode != ws.OpPong || p != "p" {
		t.Fatalf("client read %v %q; want the pong", h.OpCode, p)
	}
	write(t, conn, clientFrame(ws.OpBinary, true, "m5"), clientFrame(ws.OpClose, true, "\x03\xe8"))
	err := <-done
	var ce *CloseError
	if !errors.As(err, &ce) || ce.Code != 1000 {
		t.Fatalf("reading ended with %v; want the client's close", err)
	}
	want := []string{"fast:m1", "fast:m2", "read:t1", "fast:m3", "fast:" + strings.Repeat("m4", 100), "fast:m5"}
	if got := l.all(); !slices.Equal(got, want) {
		t.Fatalf("got %q; want %q", got, want)
	}
}

// A wss:// connection dialled with a loop goes on it (TLS fed by the
// loop) and works as without one.
func TestClientOverTLSGoesOnTheLoop(t *testing.T) {
	srv := httptest.NewUnstartedServer(echoServer(t, make(chan bool, 8), nil).Config.Handler)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	c := clientDial(t, "wss://"+srv.Listener.Addr().String(), DialOptions{TLSConfig: trusting(srv), Loop: testLoop(t)})
	if !c.OnLoop() {
		t.Fatal("the TLS connection is not on the loop")
	}
	if err := c.WriteText([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	if got, err := readMessage(c); err != nil || string(got) != "hi" {
		t.Fatalf("echo = %q, %v", got, err)
	}
}
