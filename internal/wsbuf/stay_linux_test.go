//go:build linux && !386

package wsbuf

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// frameBytes is f as the server writes it, for one write (one segment).
func frameBytes(fs ...ws.Frame) []byte {
	var b bytes.Buffer
	for _, f := range fs {
		_ = ws.WriteFrame(&b, f)
	}
	return b.Bytes()
}

// waitPolled waits until the client's reader waits in the runtime's
// poller for its socket to be readable, having read all there was.
func waitPolled(t *testing.T) {
	t.Helper()
	testwait.ForNil(t, "the reader to wait in the poller", func() error {
		for _, g := range testwait.Stacks() {
			if strings.Contains(g, "wsbuf.(*sockReader)") && strings.Contains(g, "runtime_pollWait") {
				return nil
			}
		}
		return errors.New("no reader waits in the poller")
	})
}

// readLoop reads n messages from c, each (or the error that ended it)
// sent on the channel it returns.
func readLoop(c *Client, n int) <-chan string {
	got := make(chan string, n)
	go func() {
		for range n {
			m, err := readMessage(c)
			if err != nil {
				got <- "error: " + err.Error()
				return
			}
			got <- string(m)
		}
	}()
	return got
}

// A message that arrives while the reader waits costs one read system
// call, not a read that finds the socket empty and then the read that
// gets it: the reader waits for the socket's next edge without reading
// first (one read finds it empty, before the first message).
func TestClientReadsAMessageThatCameWhileItWaitedInOneSystemCall(t *testing.T) {
	const n = 20
	next := make(chan struct{})
	url := rawWS(t, func(c net.Conn, br *bufio.Reader) {
		for i := 0; ; i++ {
			if _, ok := <-next; !ok {
				break
			}
			if _, err := c.Write(frameBytes(frameOf(ws.OpText, true, fmt.Sprint("message ", i)))); err != nil {
				return
			}
		}
		_, _ = io.Copy(io.Discard, br)
	})
	c := clientDial(t, url, DialOptions{})
	got := readLoop(c, n)
	for i := range n {
		waitPolled(t)
		next <- struct{}{}
		if m, want := <-got, fmt.Sprint("message ", i); m != want {
			t.Fatalf("message %d = %q, want %q", i, m, want)
		}
	}
	close(next)
	if r := c.lean.sysReads; r > n+1 {
		t.Errorf("%d messages took %d read system calls; want one each, and one before the first", n, r)
	}
}

// A frame whose first byte comes alone, the rest once the reader waits
// for more, is read whole; two frames that come in one segment are both
// read, the second from what the first read took.
func TestClientReadsFramesHoweverTheSegmentsCutThem(t *testing.T) {
	split := frameBytes(frameOf(ws.OpText, true, "split in two"))
	two := frameBytes(frameOf(ws.OpText, true, "first"), frameOf(ws.OpBinary, true, "second"))
	more := make(chan struct{})
	url := rawWS(t, func(c net.Conn, br *bufio.Reader) {
		_, _ = c.Write(split[:1])
		<-more
		_, _ = c.Write(split[1:])
		_, _ = c.Write(two)
		_, _ = io.Copy(io.Discard, br)
	})
	c := clientDial(t, url, DialOptions{})
	got := readLoop(c, 3)
	testwait.ForNil(t, "the reader to wait for the rest of a frame's header", func() error {
		if testwait.StackWith("(*Client).Next") == "" {
			return errors.New("the reader is not in Next")
		}
		return nil
	})
	waitPolled(t)
	close(more)
	for _, want := range []string{"split in two", "first", "second"} {
		if m := <-got; m != want {
			t.Fatalf("message = %q, want %q", m, want)
		}
	}
}

// A peer that closes right behind its last message, the FIN in the same
// segment as the message (so in the wake the reader gets for it), ends
// the reader after that message: the read that took the message stopped
// short of the FIN, which raises no edge of its own.
func TestClientSeesThePeersCloseRightBehindItsLastMessage(t *testing.T) {
	_, got := lastMessageThen(t, func(c net.Conn) {
		// Corked, the frame is held back until the close, which sends it
		// with the FIN in one segment.
		if raw, err := c.(*net.TCPConn).SyscallConn(); err == nil {
			_ = raw.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, 1) })
		}
	})
	m := readerEnd(t, got)
	if !strings.HasPrefix(m, "error: ") || !strings.Contains(m, "EOF") {
		t.Fatalf("after the peer closed: %q, want an EOF", m)
	}
}

// A peer that resets the connection right behind its last message: the
// reset may come in the same wake as the message, where the kernel does
// not say it is there (stay_linux.go); the connection's next write fails
// and ends the reader.
func TestClientReaderEndsOnAResetRightBehindTheLastMessageOnceAWriteFails(t *testing.T) {
	c, got := lastMessageThen(t, func(c net.Conn) { _ = c.(*net.TCPConn).SetLinger(0) })
	var werr error
	testwait.ForNil(t, "a write to fail", func() error {
		if werr = c.WriteText([]byte("hello")); werr == nil {
			return errors.New("the write went")
		}
		return nil
	})
	m := readerEnd(t, got)
	if !strings.HasPrefix(m, "error: ") {
		t.Fatalf("after the reset (the write: %v): %q, want an error", werr, m)
	}
}

// Close returns while the reader holds a message it read (its raw read
// suspended, the next message read with it), called from another
// goroutine between the reader's reads; a read after it fails with
// net.ErrClosed once what was read is taken. Close also ends a reader
// that waits in the poller.
func TestClientCloseEndsAReaderThatHoldsOrWaits(t *testing.T) {
	for _, waiting := range []bool{false, true} {
		t.Run(fmt.Sprint("waiting=", waiting), func(t *testing.T) {
			url := rawWS(t, func(c net.Conn, br *bufio.Reader) {
				_, _ = c.Write(frameBytes(frameOf(ws.OpText, true, "one"), frameOf(ws.OpText, true, "two")))
				_, _ = io.Copy(io.Discard, br)
			})
			c := clientDial(t, url, DialOptions{})
			if m, err := readMessage(c); err != nil || string(m) != "one" {
				t.Fatalf("message = %q, %v; want \"one\"", m, err)
			}
			if waiting {
				if m, err := readMessage(c); err != nil || string(m) != "two" {
					t.Fatalf("message = %q, %v; want \"two\"", m, err)
				}
				got := readLoop(c, 1)
				waitPolled(t)
				_ = c.Close()
				if m := <-got; !strings.Contains(m, net.ErrClosed.Error()) {
					t.Fatalf("the waiting reader got %q, want net.ErrClosed", m)
				}
				return
			}
			closed := make(chan error, 1)
			go func() { closed <- c.Close() }()
			testwait.ForNil(t, "Close to return", func() error {
				select {
				case <-closed:
					return nil
				default:
					return errors.New("Close waits")
				}
			})
			m, err := readMessage(c) // "two" came with "one": it may be read
			if err == nil && string(m) == "two" {
				m, err = readMessage(c)
			}
			if !errors.Is(err, net.ErrClosed) {
				t.Fatalf("a read after Close = %q, %v; want net.ErrClosed", m, err)
			}
		})
	}
}

// A read deadline that passes ends the wait with os.ErrDeadlineExceeded;
// with it cleared, the next message is read.
func TestClientReadDeadlineEndsTheWait(t *testing.T) {
	send := make(chan struct{})
	url := rawWS(t, func(c net.Conn, br *bufio.Reader) {
		<-send
		_, _ = c.Write(frameBytes(frameOf(ws.OpText, true, "after")))
		_, _ = io.Copy(io.Discard, br)
	})
	c := clientDial(t, url, DialOptions{})
	got := readLoop(c, 1)
	waitPolled(t)
	_ = c.sock.SetReadDeadline(time.Unix(1, 0))
	if m := <-got; !strings.Contains(m, os.ErrDeadlineExceeded.Error()) {
		t.Fatalf("the reader got %q, want os.ErrDeadlineExceeded", m)
	}
	_ = c.sock.SetReadDeadline(time.Time{})
	close(send)
	if m, err := readMessage(c); err != nil || string(m) != "after" {
		t.Fatalf("message = %q, %v; want \"after\"", m, err)
	}
}

// readerEnd is what readLoop's reader reported last, waited for.
func readerEnd(t *testing.T, got <-chan string) string {
	t.Helper()
	var m string
	testwait.ForNil(t, "the reader to end", func() error {
		select {
		case m = <-got:
			return nil
		default:
			return errors.New("the reader still waits")
		}
	})
	return m
}

// lastMessageThen dials a peer that, once the client's reader waits, sets
// its socket up with before, sends one message ("last", read here) and
// closes; it returns the client and what its reader reports next.
func lastMessageThen(t *testing.T, before func(net.Conn)) (*Client, <-chan string) {
	t.Helper()
	send := make(chan struct{})
	url := rawWS(t, func(c net.Conn, _ *bufio.Reader) {
		<-send
		before(c)
		_, _ = c.Write(frameBytes(frameOf(ws.OpText, true, "last")))
		_ = c.Close()
	})
	c := clientDial(t, url, DialOptions{})
	got := readLoop(c, 2)
	waitPolled(t)
	close(send)
	if m := <-got; m != "last" {
		t.Fatalf("message = %q, want \"last\"", m)
	}
	return c, got
}
