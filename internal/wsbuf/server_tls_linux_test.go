//go:build linux

package wsbuf

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gobwas/ws"

	"github.com/turnstile-gw/turnstile/internal/evloop"
)

// tlsAcceptServer serves Accept over TLS on a TLSListener, each connection
// handed to serve (and closed when it returns); the test's end waits for
// every serve to return. It returns the address and a client TLS
// configuration that trusts the server.
func tlsAcceptServer(t testing.TB, serve func(*ServerConn)) (string, *tls.Config) {
	t.Helper()
	cert, pool := testCert(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wg.Add(1) // (before the upgrade: see acceptServer)
		defer wg.Done()
		c, err := Accept(w, r, AcceptOptions{})
		if err != nil {
			return
		}
		defer func() { _ = c.CloseNow() }()
		serve(c)
	}), ErrorLog: stdlog.New(io.Discard, "", 0)}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(TLSListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}}))
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-served
		wg.Wait()
	})
	return ln.Addr().String(), &tls.Config{RootCAs: pool}
}

// choppy writes what it is given a few bytes at a time (1 to 13), each
// piece a write of its own: the server's reads cut TLS records, and their
// headers, anywhere.
type choppy struct {
	net.Conn
	k int
}

func (c *choppy) Write(p []byte) (int, error) {
	for off := 0; off < len(p); c.k++ {
		m := min(len(p)-off, 1+c.k%13)
		if _, err := c.Conn.Write(p[off : off+m]); err != nil {
			return off, err
		}
		off += m
	}
	return len(p), nil
}

// tlsRawClient opens a WebSocket over TLS to addr by hand, first sent with
// its handshake request (the same TLS write) and then in a write of its
// own before the response is read: the server reads some of it with the
// request, into the HTTP server's buffer and tls.Conn's. chop cuts what it
// writes into small pieces.
func tlsRawClient(t testing.TB, addr string, cfg *tls.Config, chop bool, first, then []byte) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if chop {
		nc = &choppy{Conn: nc}
	}
	cfg = cfg.Clone()
	cfg.ServerName = "127.0.0.1"
	c := tls.Client(nc, cfg)
	t.Cleanup(func() { _ = nc.Close() })
	req := "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := c.Write(append([]byte(req), first...)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(then); err != nil {
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

// cat is frames one after another.
func cat(fs ...[]byte) []byte { return slices.Concat(fs...) }

// A ServerConn accepted over TLS on a TLSListener moves to an event loop
// with its TLS (Attach) between messages, with frames that came with the
// ones before it already read (into the HTTP server's buffer and into
// tls.Conn) and frames still to come: its fast path takes the binary
// messages, unmasked, and its reader reads text, a ping (answered), a
// fragmented message and one over the fast path's limit, in the order they
// came; its writes, short and long, reach the browser; the browser's close
// (a close frame, or TLS's close_notify alone) reaches the reader. Again
// with the browser's bytes arriving a few at a time.
func TestServerConnOverTLSOnALoopGivesItsFastPathBinaryMessagesInOrder(t *testing.T) {
	for _, chop := range []bool{false, true} {
		for _, end := range []string{"close", "close_notify"} {
			name := end
			if chop {
				name += "/cut"
			}
			t.Run(name, func(t *testing.T) { testServerConnOverTLSOnALoop(t, chop, end) })
		}
	}
}

func testServerConnOverTLSOnALoop(t *testing.T, chop bool, end string) {
	loop := testLoop(t)
	var l log
	done := make(chan error, 1)
	long := strings.Repeat("w", 50000)
	addr, cfg := tlsAcceptServer(t, func(c *ServerConn) {
		c.SetReadLimit(64 << 10)
		if _, data, err := serverRead(c); err != nil || string(data) != "start" {
			done <- errors.Join(errors.New("no start"), err)
			return
		}
		if err := c.Attach(loop, 0); err != nil {
			done <- err
			return
		}
		if !c.OnLoop() {
			done <- errors.New("not on the loop after Attach")
			return
		}
		c.SetFast(func(binary bool, p []byte) bool {
			l.add("fast:" + named(binary, p))
			return true
		})
		for _, w := range []string{"w1", long} {
			if err := c.Write(false, []byte(w)); err != nil {
				done <- err
				return
			}
		}
		for {
			binary, data, err := serverRead(c)
			if err != nil {
				done <- err
				return
			}
			l.add("read:" + named(binary, data))
		}
	})
	over := strings.Repeat("o", fastMax+1)
	c, br := tlsRawClient(t, addr, cfg, chop,
		cat(clientFrame(ws.OpText, true, "start"), clientFrame(ws.OpBinary, true, "m1"),
			clientFrame(ws.OpBinary, true, strings.Repeat("b", 6000)), clientFrame(ws.OpBinary, true, "m2")),
		cat(clientFrame(ws.OpText, true, "t1"), clientFrame(ws.OpBinary, true, "m3"), clientFrame(ws.OpPing, true, "p"),
			clientFrame(ws.OpBinary, false, "f"), clientFrame(ws.OpContinuation, true, "4"),
			clientFrame(ws.OpBinary, true, over), clientFrame(ws.OpBinary, true, "m4")))
	for _, want := range []string{"Text:w1", "Text:w*50000", "Pong:p"} {
		h, p := readServerFrame(t, br)
		if got := map[ws.OpCode]string{ws.OpPong: "Pong", ws.OpText: "Text"}[h.OpCode] + ":" + named(false, []byte(p)); got != want {
			t.Fatalf("the browser read %q; want %q", got, want)
		}
	}
	if _, err := c.Write(cat(clientFrame(ws.OpBinary, true, "m5"), clientFrame(ws.OpText, true, "t2"),
		clientFrame(ws.OpBinary, true, strings.Repeat("c", 20000)))); err != nil {
		t.Fatal(err)
	}
	if end == "close" {
		if _, err := c.Write(clientFrame(ws.OpClose, true, "\x03\xe8")); err != nil {
			t.Fatal(err)
		}
	} else if err := c.Close(); err != nil { // close_notify, then the TCP connection's end
		t.Fatal(err)
	}
	err := <-done
	var ce *CloseError
	if end == "close" && (!errors.As(err, &ce) || ce.Code != 1000) {
		t.Fatalf("reading ended with %v; want the browser's close", err)
	}
	if end == "close_notify" && !errors.Is(err, io.EOF) {
		t.Fatalf("reading ended with %v; want io.EOF", err)
	}
	want := []string{"fast:m1/b", "fast:b*6000/b", "fast:m2/b", "read:t1", "fast:m3/b", "read:f4/b",
		"read:o*32769/b", "fast:m4/b", "fast:m5/b", "read:t2", "fast:c*20000/b"}
	if got := l.all(); !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

// A ServerConn over TLS that another listener made (tls.NewListener's:
// its tls.Conn is over the TCP connection itself) stays off the loop and
// works as before.
func TestServerConnOverAnotherListenersTLSStaysOffTheLoop(t *testing.T) {
	loop := testLoop(t)
	done := make(chan error, 1)
	var wg sync.WaitGroup
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wg.Add(1)
		defer wg.Done()
		c, err := Accept(w, r, AcceptOptions{})
		if err != nil {
			return
		}
		defer func() { _ = c.CloseNow() }()
		if _, data, err := serverRead(c); err != nil || string(data) != "start" {
			done <- errors.Join(errors.New("no start"), err)
			return
		}
		if err := c.Attach(loop, 0); !errors.Is(err, errNotPlain) || c.OnLoop() {
			done <- errors.Join(errors.New("attached, or failed otherwise"), err)
			return
		}
		binary, data, err := serverRead(c)
		if err == nil {
			err = c.Write(binary, data)
		}
		done <- err
	}))
	t.Cleanup(wg.Wait)
	t.Cleanup(srv.Close)
	c, br := tlsRawClient(t, strings.TrimPrefix(srv.URL, "https://"), srv.Client().Transport.(*http.Transport).TLSClientConfig,
		false, clientFrame(ws.OpText, true, "start"), clientFrame(ws.OpBinary, true, "echo"))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if h, p := readServerFrame(t, br); h.OpCode != ws.OpBinary || p != "echo" {
		t.Fatalf("the browser read %v %q; want the echo", h.OpCode, p)
	}
	_ = c.Close()
}

// A ServerConn over TLS on a loop whose browser stops reading: its writes
// never wait, and once what the socket has not taken passes the backlog
// they fail with evloop.ErrBacklog (the session closes such a browser as
// too slow); CloseNow then ends the connection.
func TestServerConnOverTLSOnALoopFailsWritesPastItsBacklog(t *testing.T) {
	loop := testLoop(t)
	done := make(chan error, 1)
	addr, cfg := tlsAcceptServer(t, func(c *ServerConn) {
		if _, _, err := serverRead(c); err != nil {
			done <- err
			return
		}
		if err := c.Attach(loop, 256<<10); err != nil {
			done <- err
			return
		}
		p := make([]byte, 16<<10)
		for sent := 0; ; sent += len(p) {
			if err := c.Write(true, p); err != nil {
				done <- err
				return
			}
			if sent > 64<<20 {
				done <- errors.New("64 MiB written to a browser that reads nothing")
				return
			}
		}
	})
	tlsRawClient(t, addr, cfg, false, clientFrame(ws.OpText, true, "start"), nil) // and it reads nothing
	if err := <-done; !errors.Is(err, evloop.ErrBacklog) {
		t.Fatalf("writing ended with %v; want evloop.ErrBacklog", err)
	}
}

// A browser's message taken by the fast path of a ServerConn over TLS on a
// loop allocates nothing of the ServerConn's: the one allocation is
// crypto/tls's own, as for a wss:// Client
// (TestClientOverTLSOnALoopTakesAMessageWithOnlyTLSsAllocation).
func TestServerConnOverTLSOnALoopTakesAMessageWithOnlyTLSsAllocation(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	loop := testLoop(t)
	got := make(chan struct{}, 1)
	ready := make(chan error, 1)
	addr, cfg := tlsAcceptServer(t, func(c *ServerConn) {
		if _, _, err := serverRead(c); err != nil {
			ready <- err
			return
		}
		ready <- c.Attach(loop, 0)
		c.SetFast(func(binary bool, p []byte) bool {
			got <- struct{}{}
			return true
		})
		_, _, _ = serverRead(c) // the fast path takes every message; the close ends it
	})
	c, _ := tlsRawClient(t, addr, cfg, false, clientFrame(ws.OpText, true, "start"), nil)
	if err := <-ready; err != nil {
		t.Fatal(err)
	}
	msg := clientFrame(ws.OpBinary, true, strings.Repeat("m", 1280)) // 40 ms of 16 kHz audio
	allocs := testing.AllocsPerRun(500, func() {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		<-got
	})
	if _, err := c.Write(clientFrame(ws.OpClose, true, "\x03\xe8")); err != nil {
		t.Fatal(err)
	}
	t.Logf("%v allocations a message", allocs)
	if allocs > 1 {
		t.Fatalf("%v allocations a message; want crypto/tls's one", allocs)
	}
}
