//go:build linux

package wsbuf

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/gobwas/ws"
	"github.com/turnstile-gw/turnstile/internal/tlstest"
)

// testCert is a self-signed certificate for 127.0.0.1 and a pool that
// trusts it.
func testCert(t testing.TB) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	c := tlstest.New(t, "wsbuf")
	return c.Pair(t), c.Pool()
}

// rawWSS serves one WebSocket connection over TLS by hand, as rawWS does;
// first goes out in the same write as the handshake's response (the
// client reads it with the response). It returns the URL and a client
// TLS configuration that trusts the server.
func rawWSS(t testing.TB, first []byte, handle func(c *tls.Conn, br *bufio.Reader)) (string, *tls.Config) {
	t.Helper()
	cert, pool := testCert(t)
	addr := rawServer(t, func(c net.Conn, _ *bufio.Reader) {
		tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}})
		defer func() { _ = tc.Close() }()
		br := bufio.NewReader(tc)
		bw := bufio.NewWriterSize(tc, 64<<10)
		if _, err := (ws.Upgrader{}).Upgrade(struct {
			io.Reader
			io.Writer
		}{br, bw}); err != nil {
			return
		}
		_, _ = bw.Write(first)
		if bw.Flush() != nil {
			return
		}
		handle(tc, br)
	})
	return "wss://" + addr, &tls.Config{RootCAs: pool}
}

// frames is the frames compiled, one after another.
func frames(fs ...ws.Frame) []byte {
	var b []byte
	for _, f := range fs {
		fb, _ := ws.CompileFrame(f)
		b = append(b, fb...)
	}
	return b
}

// named is how a message appears in a test's log: itself when short,
// else its first byte and its length; binary ones marked.
// takeA is a fast path that takes the messages starting with 'a', and
// logs them.
func (l *log) takeA(binary bool, p []byte) bool {
	if p[0] != 'a' {
		return false
	}
	l.add("fast:" + named(binary, p))
	return true
}

func named(binary bool, p []byte) string {
	s := string(p)
	if len(p) > 12 {
		s = fmt.Sprintf("%c*%d", p[0], len(p))
	}
	if binary {
		s += "/b"
	}
	return s
}

// A wss:// Client on an event loop hands whole messages to its fast path
// while its reader waits, the reader reads the rest, and the two see the
// messages in the order they came: text and binary, around a ping, a
// fragmented message, messages over the fast path's limit, some sent with
// the handshake's response (read with it, before the move to the loop)
// and some after; the close reaches the reader. The ping is answered, and
// the client's writes, short and long, reach the server.
func TestClientOverTLSOnALoopGivesItsFastPathWhatItTakesAndTheReaderTheRestInOrder(t *testing.T) {
	big1, big2 := bytes.Repeat([]byte("a"), fastMax+1), bytes.Repeat([]byte("a"), 100000)
	first := frames(
		frameOf(ws.OpText, true, "a1"), ws.NewFrame(ws.OpBinary, true, []byte("a2")), frameOf(ws.OpPing, true, "p"),
		frameOf(ws.OpText, true, "b1"), frameOf(ws.OpText, true, "a3"),
		frameOf(ws.OpText, false, "a"), frameOf(ws.OpContinuation, true, "4"),
		ws.NewFrame(ws.OpBinary, true, big1), ws.NewFrame(ws.OpBinary, true, []byte("a5")))
	heard := make(chan string, 3) // the client's two writes, then its pong
	url, cfg := rawWSS(t, first, func(c *tls.Conn, br *bufio.Reader) {
		for range 3 {
			h, p, err := readClientFrame(br)
			if err != nil {
				return
			}
			heard <- map[ws.OpCode]string{ws.OpPong: "Pong", ws.OpText: "Text"}[h.OpCode] + ":" + named(false, p)
		}
		then := frames(frameOf(ws.OpText, true, "a6"), ws.NewFrame(ws.OpBinary, true, big2),
			frameOf(ws.OpText, true, "b2"), ws.NewFrame(ws.OpBinary, true, bytes.Repeat([]byte("a"), fastMax)),
			frameOf(ws.OpText, true, "a7"),
			ws.NewCloseFrame(ws.NewCloseFrameBody(ws.StatusNormalClosure, "bye")))
		for len(then) > 0 { // in small writes: records, and messages, cut anywhere
			n := min(len(then), 1000)
			if _, err := c.Write(then[:n]); err != nil {
				return
			}
			then = then[n:]
		}
		_, _, _ = readClientFrame(br)
	})
	c := clientDial(t, url, DialOptions{TLSConfig: cfg, Loop: testLoop(t)})
	if !c.OnLoop() {
		t.Fatal("the wss:// client is not on the loop")
	}
	var l log
	c.SetFast(l.takeA)
	if err := c.WriteText([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	long := bytes.Repeat([]byte("w"), 70000)
	if err := c.WriteText(long); err != nil {
		t.Fatal(err)
	}
	var err error
	for err == nil {
		c.Wait()
		if err = c.Next(); err != nil {
			break
		}
		var m []byte
		if m, err = io.ReadAll(c); err == nil {
			l.add("read:" + named(false, m))
		}
	}
	var ce *CloseError
	if !errors.As(err, &ce) || ce.Code != 1000 || ce.Reason != "bye" {
		t.Fatalf("reading ended with %v; want the server's close 1000 bye", err)
	}
	want := []string{"fast:a1", "fast:a2/b", "read:b1", "fast:a3", "read:a4", fmt.Sprintf("read:a*%d", fastMax+1),
		"fast:a5/b", "fast:a6", "read:a*100000", "read:b2", fmt.Sprintf("fast:a*%d/b", fastMax), "fast:a7"}
	if got := l.all(); !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	for _, w := range []string{"Text:hi", "Text:w*70000", "Pong:p"} {
		if h := <-heard; h != w {
			t.Fatalf("the server heard %q; want %q", h, w)
		}
	}
}

// When the server ends a connection on a loop (ws://; wss://, with TLS's
// close_notify or without), the reader waiting for its next message hears
// of it after the messages before, the end having come with them.
func TestClientOnALoopReadsTheEndOfTheConnection(t *testing.T) {
	for _, how := range []string{"ws", "wss+close_notify", "wss"} {
		t.Run(how, func(t *testing.T) {
			ended := make(chan struct{})
			serve := func(c net.Conn, br *bufio.Reader) {
				defer close(ended)
				if _, _, err := readClientFrame(br); err != nil {
					return
				}
				_, _ = c.Write(frames(frameOf(ws.OpText, true, "a1"), frameOf(ws.OpText, true, "b1")))
				if tc, ok := c.(*tls.Conn); ok && how == "wss" {
					c = tc.NetConn()
				}
				_ = c.Close()
			}
			o := DialOptions{Loop: testLoop(t)}
			var url string
			if how == "ws" {
				url = rawWS(t, serve)
			} else {
				url, o.TLSConfig = rawWSS(t, nil, func(c *tls.Conn, br *bufio.Reader) { serve(c, br) })
			}
			c := clientDial(t, url, o)
			var l log
			c.SetFast(l.takeA)
			if err := c.WriteText([]byte("go")); err != nil {
				t.Fatal(err)
			}
			<-ended // the messages and the end are here before the reader waits
			m, err := readMessage(c)
			if err != nil || string(m) != "b1" {
				t.Fatalf("read %q, %v; want b1", m, err)
			}
			if _, err = readMessage(c); err == nil {
				t.Fatal("a message read after the server left")
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("reading ended with %v; want the end of the connection", err)
			}
			if got := l.all(); !slices.Equal(got, []string{"fast:a1"}) {
				t.Fatalf("the fast path took %q", got)
			}
		})
	}
}

// Every message size from 0 to 200 000 bytes, echoed by a server over
// wss:// to a client on a loop, reaches the fast path (a message of an
// even size up to its limit) or the reader (the rest), whole and in order.
func TestClientOverTLSOnALoopEchoesEveryMessageSize(t *testing.T) {
	plain := echoServer(t, make(chan bool, 8), nil)
	srv := httptest.NewUnstartedServer(plain.Config.Handler)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	c := clientDial(t, "wss"+strings.TrimPrefix(srv.URL, "https"), DialOptions{TLSConfig: trusting(srv), Loop: testLoop(t)})
	if !c.OnLoop() {
		t.Fatal("the wss:// client is not on the loop")
	}
	var l log
	check := func(how string, p []byte) {
		if len(p) > 0 && bytes.Count(p, p[:1]) != len(p) {
			l.add(how + ":garbled")
		}
		l.add(fmt.Sprintf("%s:%s", how, named(false, p[:min(1, len(p))])+fmt.Sprint(len(p))))
	}
	c.SetFast(func(binary bool, p []byte) bool {
		if len(p)%2 != 0 {
			return false
		}
		check("fast", p)
		return true
	})
	var want []string
	for i, n := range echoSizes() {
		msg := bytes.Repeat([]byte{byte('a' + i%26)}, n)
		if err := c.WriteText(msg); err != nil {
			t.Fatalf("write %d bytes: %v", n, err)
		}
		if n%2 == 0 && n <= fastMax {
			want = append(want, fmt.Sprintf("fast:%s", named(false, msg[:min(1, n)])+fmt.Sprint(n)))
			continue // the fast path takes it while the reader waits for the next one of its own
		}
		want = append(want, fmt.Sprintf("read:%s", named(false, msg[:1])+fmt.Sprint(n)))
		m, err := readMessage(c)
		if err != nil {
			t.Fatalf("read the echo of %d bytes: %v", n, err)
		}
		check("read", m)
	}
	if got := l.all(); !slices.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("message %d: got %q, want %q", i, got[i], want[i])
			}
		}
		t.Fatalf("got %d messages, want %d", len(got), len(want))
	}
}

// trickle relays one connection to addr, the server's bytes to the client
// in pieces of 1 to 13 bytes, each its own write: the client's reads cut
// TLS records, and their headers, anywhere. It returns its address.
func trickle(t testing.TB, addr string) string {
	t.Helper()
	return rawServer(t, func(c net.Conn, br *bufio.Reader) {
		s, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		defer func() { _ = s.Close() }()
		go func() {
			_, _ = io.Copy(s, br)
			_ = s.(*net.TCPConn).CloseWrite()
		}()
		buf := make([]byte, 4096)
		for k := 0; ; {
			n, err := s.Read(buf)
			for b := buf[:n]; len(b) > 0; k++ {
				m := min(len(b), 1+k%13)
				if _, err := c.Write(b[:m]); err != nil {
					return
				}
				b = b[m:]
			}
			if err != nil {
				return
			}
		}
	})
}

// Over a connection that delivers the server's bytes a few at a time, a
// wss:// Client on a loop still gives its fast path and its reader every
// message whole and in order.
func TestClientOverTLSOnALoopReadsRecordsCutAnywhere(t *testing.T) {
	var msgs []ws.Frame
	var want []string
	for i, n := range []int{1, 2, 40, 1000, 3000, 16 << 10, 20000, 7, fastMax, 5, fastMax + 1, 300, 2, 70000, 9, 1} {
		p := bytes.Repeat([]byte{byte('a' + i%2)}, n) // a: the fast path's; b: the reader's
		msgs = append(msgs, ws.NewFrame(ws.OpBinary, true, p))
		if p[0] == 'a' && n <= fastMax {
			want = append(want, "fast:"+named(true, p))
		} else {
			want = append(want, "read:"+named(false, p))
		}
	}
	msgs = append(msgs, ws.NewCloseFrame(ws.NewCloseFrameBody(ws.StatusNormalClosure, "")))
	url, cfg := rawWSS(t, nil, func(c *tls.Conn, br *bufio.Reader) {
		if _, _, err := readClientFrame(br); err != nil {
			return
		}
		for _, f := range msgs { // a write, and so a record or more, a message
			if ws.WriteFrame(c, f) != nil {
				return
			}
		}
		_, _, _ = readClientFrame(br)
	})
	cfg.ServerName = "127.0.0.1"
	c := clientDial(t, "wss://"+trickle(t, strings.TrimPrefix(url, "wss://")), DialOptions{TLSConfig: cfg, Loop: testLoop(t)})
	var l log
	c.SetFast(l.takeA)
	if err := c.WriteText([]byte("go")); err != nil {
		t.Fatal(err)
	}
	var err error
	for err == nil {
		var m []byte
		if m, err = readMessage(c); err == nil {
			l.add("read:" + named(false, m))
		}
	}
	if ce, ok := errors.AsType[*CloseError](err); !ok || ce.Code != 1000 {
		t.Fatalf("reading ended with %v; want the server's close", err)
	}
	if got := l.all(); !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

// A message taken by the fast path over wss:// on a loop allocates
// nothing of the Client's: the one allocation is crypto/tls's own (its
// reader of the connection, in each read of a record), as off the loop.
// (The feed follows the records: without it, a second read of tls.Conn
// per message would find it had nothing more, a second allocation.)
func TestClientOverTLSOnALoopTakesAMessageWithOnlyTLSsAllocation(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	msg, _ := ws.CompileFrame(ws.NewFrame(ws.OpText, true, bytes.Repeat([]byte("A"), 2048)))
	send := make(chan struct{})
	url, cfg := rawWSS(t, nil, func(c *tls.Conn, br *bufio.Reader) {
		for range send {
			if _, err := c.Write(msg); err != nil {
				return
			}
		}
	})
	c := clientDial(t, url, DialOptions{TLSConfig: cfg, Loop: testLoop(t)})
	t.Cleanup(func() { close(send) })
	got := make(chan struct{}, 1)
	c.SetFast(func(binary bool, p []byte) bool {
		got <- struct{}{}
		return true
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Wait()
	}()
	allocs := testing.AllocsPerRun(500, func() {
		send <- struct{}{}
		<-got
	})
	_ = c.Close()
	<-done
	if allocs > 1 {
		t.Fatalf("%v allocations a message; want crypto/tls's one", allocs)
	}
}
