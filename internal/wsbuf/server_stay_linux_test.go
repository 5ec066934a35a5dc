//go:build linux && !386

package wsbuf

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gobwas/ws"

	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// stayServer reads as a browser's reader does while its session streams
// audio: StayInside before each read while stay holds (a session calls it
// for every microphone frame). Each message read, or the error that ended
// the reading, is handed over on results, unbuffered: the reader holds
// what it read until the test takes it.
type stayServer struct {
	url     string
	srv     chan *ServerConn
	results chan readResult
	stay    atomic.Bool
}

func newStayServer(t *testing.T) *stayServer {
	t.Helper()
	s := &stayServer{srv: make(chan *ServerConn, 1), results: make(chan readResult)}
	s.stay.Store(true)
	quit := make(chan struct{})
	s.url = acceptServer(t, func(c *ServerConn) {
		s.srv <- c
		for {
			if s.stay.Load() {
				c.StayInside()
			}
			binary, data, err := serverRead(c)
			select {
			case s.results <- readResult{binary: binary, data: string(data), err: err}:
			case <-quit:
				return
			}
			if err != nil {
				return
			}
		}
	})
	t.Cleanup(func() { close(quit) })
	return s
}

// want takes the next result and checks it is the message m.
func (s *stayServer) want(t *testing.T, m string) {
	t.Helper()
	if r := <-s.results; r.err != nil || r.data != m {
		t.Fatalf("read %q, %v; want %q", r.data, r.err, m)
	}
}

// coroutines counts the goroutines that are a reader's coroutine.
func coroutines() int {
	n := 0
	for _, g := range testwait.Stacks() {
		if strings.Contains(g, "wsbuf.(*sockReader).reads") {
			n++
		}
	}
	return n
}

// waitCoroutines waits until n goroutines are a reader's coroutine.
func waitCoroutines(t *testing.T, n int) {
	t.Helper()
	testwait.ForNil(t, fmt.Sprint(n, " reader coroutines"), func() error {
		if k := coroutines(); k != n {
			return fmt.Errorf("%d reader coroutines", k)
		}
		return nil
	})
}

// While it stays inside, the browser's reader reads a message that came
// while it waited in one read system call, not a read that finds the
// socket empty and then the read that gets it (one read finds it empty,
// before the first message; one reads the end).
func TestServerStayingInsideReadsAMessageInOneSystemCall(t *testing.T) {
	const n = 20
	s := newStayServer(t)
	c, _ := rawClient(t, s.url)
	srv := <-s.srv
	for i := range n {
		waitPolled(t)
		write(t, c, clientFrame(ws.OpBinary, true, fmt.Sprint("chunk ", i)))
		s.want(t, fmt.Sprint("chunk ", i))
	}
	_ = c.Close()
	if r := <-s.results; r.err == nil {
		t.Fatalf("after the browser's close: %q, want an error", r.data)
	}
	if r := srv.lean.sysReads; r > n+2 {
		t.Errorf("%d messages took %d read system calls; want one each, one before the first and one for the close", n, r)
	}
}

// Leave ends the reader's coroutine — at once when the reader waits for a
// message, before its next read when it holds one — and the reader reads
// on as before it stayed inside, as often as it goes in and out: no
// goroutine but the reader's, and no deadline left behind (Leave wakes a
// waiting reader with one).
func TestServerLeaveEndsTheCoroutineAndReadsOnAsBefore(t *testing.T) {
	for _, waiting := range []bool{true, false} {
		t.Run(fmt.Sprint("waiting=", waiting), func(t *testing.T) {
			s := newStayServer(t)
			c, _ := rawClient(t, s.url)
			srv := <-s.srv
			for round := range 3 {
				s.stay.Store(true)
				write(t, c, clientFrame(ws.OpBinary, true, fmt.Sprint("in ", round)))
				s.want(t, fmt.Sprint("in ", round))
				if waiting {
					waitPolled(t)
					waitCoroutines(t, 1)
					s.stay.Store(false)
					srv.Leave()
				} else {
					// Two frames in one segment: the reader holds the
					// second, its coroutine suspended.
					write(t, c, clientFrame(ws.OpBinary, true, "held 1"), clientFrame(ws.OpBinary, true, "held 2"))
					s.want(t, "held 1")
					waitCoroutines(t, 1)
					s.stay.Store(false)
					srv.Leave()
					s.want(t, "held 2")
				}
				waitCoroutines(t, 0)
				write(t, c, clientFrame(ws.OpText, true, fmt.Sprint("out ", round)))
				s.want(t, fmt.Sprint("out ", round))
				waitPolled(t)
				if k := coroutines(); k != 0 {
					t.Fatalf("round %d: %d reader coroutines after Leave, want none", round, k)
				}
			}
		})
	}
}

// Close (its handshake) and CloseNow return while the reader stays inside,
// holding a message its coroutine read (suspended inside its raw read,
// which holds the socket) or waiting for one; the reader ends with the
// close, and nothing is left running (goleak, TestMain).
func TestServerCloseEndsAReaderThatStaysHoldingOrWaiting(t *testing.T) {
	for _, waiting := range []bool{false, true} {
		for _, handshake := range []bool{false, true} {
			t.Run(fmt.Sprintf("waiting=%v,handshake=%v", waiting, handshake), func(t *testing.T) {
				s := newStayServer(t)
				c, br := rawClient(t, s.url)
				srv := <-s.srv
				write(t, c, clientFrame(ws.OpBinary, true, "one"), clientFrame(ws.OpBinary, true, "two"))
				s.want(t, "one")
				if waiting {
					s.want(t, "two")
					waitPolled(t)
				}
				waitCoroutines(t, 1)
				closed := make(chan error, 1)
				if handshake {
					go func() { closed <- srv.Close(1000, "bye") }()
					h, p := readServerFrame(t, br)
					if h.OpCode != ws.OpClose {
						t.Fatalf("the server sent %v, want its close", h.OpCode)
					}
					write(t, c, clientFrame(ws.OpClose, true, p))
				} else {
					go func() { closed <- srv.CloseNow() }()
				}
				testwait.ForNil(t, "the close to return", func() error {
					select {
					case err := <-closed:
						if err != nil {
							t.Errorf("the close: %v", err)
						}
						return nil
					default:
						return errors.New("the close waits")
					}
				})
				if !waiting {
					s.want(t, "two") // read with "one"
				}
				r := <-s.results
				var ce *CloseError
				switch {
				case handshake && !errors.As(r.err, &ce):
					t.Fatalf("the reader after Close: %q, %v; want the browser's close", r.data, r.err)
				case !handshake && !errors.Is(r.err, net.ErrClosed):
					t.Fatalf("the reader after CloseNow: %q, %v; want net.ErrClosed", r.data, r.err)
				}
				waitCoroutines(t, 0)
			})
		}
	}
}

// Leave from another goroutine at any moment of the reads — the reader
// waiting, reading, holding, entering again — loses no message and leaves
// no deadline behind: every message of a stream comes whole and in order
// while the reader goes in and out.
func TestServerLeaveRacingTheReadsLosesNothing(t *testing.T) {
	const n = 2000
	s := newStayServer(t)
	c, _ := rawClient(t, s.url)
	srv := <-s.srv
	sent := make(chan error, 1)
	go func() {
		for i := range n {
			if _, err := c.Write(clientFrame(ws.OpBinary, true, fmt.Sprint("chunk ", i))); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	stop := make(chan struct{})
	left := make(chan struct{})
	go func() {
		defer close(left)
		for {
			select {
			case <-stop:
				return
			default:
				srv.Leave()
			}
		}
	}()
	for i := range n {
		s.want(t, fmt.Sprint("chunk ", i))
	}
	close(stop)
	<-left
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
}
