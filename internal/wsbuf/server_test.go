package wsbuf

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/gobwas/ws"

	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// acceptServer accepts each request with Accept (the subprotocol
// "turnstile.v1" offered) and hands the connection to serve, closing it
// when serve returns; the test's end waits for every serve to return.
func acceptServer(t *testing.T, serve func(*ServerConn)) string {
	t.Helper()
	var wg sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Counted from the handler's start, before the upgrade: the
		// server's Close does not wait for a hijacked connection's
		// handler, and one counted only after Accept could still be
		// running (and reading t) once the test's cleanup has waited.
		wg.Add(1)
		defer wg.Done()
		c, err := Accept(w, r, AcceptOptions{Subprotocols: []string{"turnstile.v1"}})
		if err != nil {
			return
		}
		defer func() { _ = c.CloseNow() }()
		serve(c)
	}))
	t.Cleanup(wg.Wait)
	t.Cleanup(srv.Close)
	return srv.URL
}

// serverRead reads one whole message, skipping ErrIdle (waiting instead).
func serverRead(c *ServerConn) (binary bool, data []byte, err error) {
	for {
		binary, err = c.Next()
		if errors.Is(err, ErrIdle) {
			c.Wait()
			continue
		}
		if err != nil {
			return false, nil, err
		}
		data, err = c.ReadBody(nil)
		return binary, data, err
	}
}

// echo echoes every message until the connection ends, and sends what
// ended it on done.
func echo(done chan<- error) func(*ServerConn) {
	return func(c *ServerConn) {
		for {
			binary, data, err := serverRead(c)
			if err == nil {
				err = c.Write(binary, data)
			}
			if err != nil {
				done <- err
				return
			}
		}
	}
}

func coderDial(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	c, resp, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(url, "http"),
		&websocket.DialOptions{Subprotocols: []string{"turnstile.v1"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get("Sec-WebSocket-Protocol"); got != "turnstile.v1" {
		t.Fatalf("subprotocol %q, want turnstile.v1", got)
	}
	c.SetReadLimit(1 << 20)
	t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

// Text and binary messages of every size around the pooled chunk's edges
// come back whole and of their type.
func TestServerEchoesTextAndBinaryOfEverySize(t *testing.T) {
	done := make(chan error, 1)
	url := acceptServer(t, func(c *ServerConn) {
		c.SetReadLimit(1 << 20) // above DefaultReadLimit: the sizes go to 200 000
		echo(done)(c)
	})
	c := coderDial(t, url)
	for _, n := range echoSizes() {
		for _, typ := range []websocket.MessageType{websocket.MessageText, websocket.MessageBinary} {
			msg := []byte(strings.Repeat("a", n))
			if err := c.Write(context.Background(), typ, msg); err != nil {
				t.Fatal(err)
			}
			got, data, err := c.Read(context.Background())
			if err != nil || got != typ || string(data) != string(msg) {
				t.Fatalf("%d bytes of %v: got %v, %d bytes, %v", n, typ, got, len(data), err)
			}
		}
	}
	_ = c.Close(websocket.StatusNormalClosure, "")
	<-done
}

// The close code and reason the server closes with reach the browser, and
// Close returns once the browser has answered.
func TestServerCloseDeliversCodeAndReason(t *testing.T) {
	closed := make(chan error, 1)
	url := acceptServer(t, func(c *ServerConn) {
		closed <- c.Close(4101, "too_slow")
	})
	c := coderDial(t, url)
	_, _, err := c.Read(context.Background())
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 4101 || ce.Reason != "too_slow" {
		t.Fatalf("the browser read %v, want close 4101 too_slow", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// A reason longer than a close frame holds is cut at a character's start:
// the browser still reads the code (a reason cut inside a character is not
// UTF-8, which fails a browser's connection with 1006).
func TestServerCutsALongCloseReasonBetweenCharacters(t *testing.T) {
	reason := strings.Repeat("é", 70) // 140 bytes; 123 falls inside a character
	closed := make(chan error, 1)
	url := acceptServer(t, func(c *ServerConn) {
		closed <- c.Close(4101, reason)
	})
	c := coderDial(t, url)
	_, _, err := c.Read(context.Background())
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 4101 || !utf8.ValidString(ce.Reason) || !strings.HasPrefix(reason, ce.Reason) ||
		len(ce.Reason) != 122 {
		t.Fatalf("the browser read %v, want close 4101 with the reason's first 61 characters", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// The browser's close code and reason reach the server's reader, and the
// browser's close handshake completes (the server answers its close).
func TestServerReadsTheBrowsersCloseCodeAndReason(t *testing.T) {
	done := make(chan error, 1)
	url := acceptServer(t, echo(done))
	c := coderDial(t, url)
	if err := c.Close(4000, "bye"); err != nil {
		t.Fatalf("the browser's close handshake: %v", err)
	}
	var ce *CloseError
	if err := <-done; !errors.As(err, &ce) || ce.Code != 4000 || ce.Reason != "bye" {
		t.Fatalf("the server read %v, want close 4000 bye", err)
	}
}

// A message over the read limit ends the reading with ErrMessageTooBig,
// and the browser is told 1009.
func TestServerClosesAMessageOverTheReadLimitWith1009(t *testing.T) {
	done := make(chan error, 1)
	url := acceptServer(t, func(c *ServerConn) {
		c.SetReadLimit(100)
		echo(done)(c)
	})
	c := coderDial(t, url)
	if err := c.Write(context.Background(), websocket.MessageText, []byte(strings.Repeat("x", 100))); err != nil {
		t.Fatal(err)
	}
	if _, data, err := c.Read(context.Background()); err != nil || len(data) != 100 {
		t.Fatalf("a message at the limit: %d bytes, %v", len(data), err)
	}
	_ = c.Write(context.Background(), websocket.MessageText, []byte(strings.Repeat("x", 101)))
	if _, _, err := c.Read(context.Background()); websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
		t.Fatalf("the browser read %v, want close 1009", err)
	}
	if err := <-done; !errors.Is(err, ErrMessageTooBig) {
		t.Fatalf("the server read %v, want ErrMessageTooBig", err)
	}
}

// Ping answers the browser's pong, and the browser's pings are answered.
func TestServerPingReturnsWithThePongAndAnswersPings(t *testing.T) {
	pinged := make(chan error, 1)
	done := make(chan error, 1)
	url := acceptServer(t, func(c *ServerConn) {
		go func() { pinged <- c.Ping(context.Background()) }()
		echo(done)(c)
	})
	c := coderDial(t, url)
	readErr := make(chan error, 1)
	go func() { _, _, err := c.Read(context.Background()); readErr <- err }() // answers the server's ping
	if err := <-pinged; err != nil {
		t.Fatalf("the server's Ping: %v", err)
	}
	if err := c.Ping(context.Background()); err != nil {
		t.Fatalf("the browser's ping: %v", err)
	}
	_ = c.CloseNow()
	<-readErr
	<-done
}

// rawClient upgrades a TCP connection by hand, so that a test decides the
// frames and how they fall into writes; first is sent with the request.
func rawClient(t *testing.T, url string, first ...[]byte) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	req := "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	write(t, c, append([][]byte{[]byte(req)}, first...)...)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols ||
		resp.Header.Get("Sec-WebSocket-Accept") != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("upgrade answered %s, accept %q", resp.Status, resp.Header.Get("Sec-WebSocket-Accept"))
	}
	return c, br
}

// clientFrame is one client frame, masked with a fixed key.
func clientFrame(op ws.OpCode, fin bool, payload string) []byte {
	f := ws.NewFrame(op, fin, []byte(payload))
	f = ws.MaskFrameInPlaceWith(f, [4]byte{1, 2, 3, 4})
	b, err := ws.CompileFrame(f)
	if err != nil {
		panic(err)
	}
	return b
}

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

// readServerFrame reads one server frame.
func readServerFrame(t *testing.T, br *bufio.Reader) (ws.Header, string) {
	t.Helper()
	h, err := ws.ReadHeader(br)
	if err != nil {
		t.Fatal(err)
	}
	if h.Masked {
		t.Fatal("a server frame is masked")
	}
	p := make([]byte, h.Length)
	if _, err := io.ReadFull(br, p); err != nil {
		t.Fatal(err)
	}
	return h, string(p)
}

// A message in fragments with control frames between them is read whole;
// the ping among them is answered, and a frame sent with the handshake
// request is read too.
func TestServerReassemblesFragmentsAroundControlFrames(t *testing.T) {
	done := make(chan error, 1)
	url := acceptServer(t, echo(done))
	c, br := rawClient(t, url, clientFrame(ws.OpText, true, "first"))
	if h, p := readServerFrame(t, br); h.OpCode != ws.OpText || p != "first" {
		t.Fatalf("the frame sent with the request came back as %v %q", h.OpCode, p)
	}
	write(t, c, clientFrame(ws.OpBinary, false, "hel"), clientFrame(ws.OpPing, true, "p"),
		clientFrame(ws.OpContinuation, false, "lo "), clientFrame(ws.OpPong, true, "x"),
		clientFrame(ws.OpContinuation, true, "world"))
	if h, p := readServerFrame(t, br); h.OpCode != ws.OpPong || p != "p" {
		t.Fatalf("the ping was answered with %v %q", h.OpCode, p)
	}
	if h, p := readServerFrame(t, br); h.OpCode != ws.OpBinary || p != "hello world" {
		t.Fatalf("the fragmented message came back as %v %q", h.OpCode, p)
	}
	_ = c.Close()
	<-done
}

// allowNone refuses every ping.
type allowNone struct{}

func (allowNone) AllowPing() bool { return false }

// A ping the hooks refuse (over the browser's message rate) is not
// answered; the messages after it are.
func TestServerLeavesAPingItsHooksRefuseUnanswered(t *testing.T) {
	done := make(chan error, 1)
	url := acceptServer(t, func(c *ServerConn) {
		c.SetHooks(allowNone{})
		echo(done)(c)
	})
	c, br := rawClient(t, url)
	write(t, c, clientFrame(ws.OpPing, true, "p"), clientFrame(ws.OpText, true, "after"))
	if h, p := readServerFrame(t, br); h.OpCode != ws.OpText || p != "after" {
		t.Fatalf("first frame back %v %q, want the echo (no pong)", h.OpCode, p)
	}
	_ = c.Close()
	<-done
}

// An unmasked frame from the browser is a protocol error: 1002.
func TestServerRefusesAnUnmaskedFrame(t *testing.T) {
	done := make(chan error, 1)
	url := acceptServer(t, echo(done))
	c, br := rawClient(t, url)
	b, _ := ws.CompileFrame(ws.NewTextFrame([]byte("plain")))
	write(t, c, b)
	h, p := readServerFrame(t, br)
	if h.OpCode != ws.OpClose || len(p) < 2 || binary.BigEndian.Uint16([]byte(p)) != 1002 {
		t.Fatalf("the server answered %v %q, want close 1002", h.OpCode, p)
	}
	if err := <-done; err == nil || errors.As(err, new(*CloseError)) {
		t.Fatalf("the server read %v, want a protocol error", err)
	}
}

// A request that is no WebSocket handshake is answered as
// coder/websocket's Accept answered it.
func TestAcceptRefusesWhatIsNoHandshake(t *testing.T) {
	var accepting atomic.Bool
	url := acceptServer(t, func(*ServerConn) {
		if !accepting.Load() {
			t.Error("accepted")
		}
	})
	good := http.Header{"Upgrade": {"websocket"}, "Connection": {"Upgrade"},
		"Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}, "Sec-Websocket-Version": {"13"}}
	for _, tc := range []struct {
		name   string
		method string
		change func(http.Header)
		status int
	}{
		{"no upgrade", "GET", func(h http.Header) { h.Del("Upgrade") }, http.StatusUpgradeRequired},
		{"no Connection: Upgrade", "GET", func(h http.Header) { h.Set("Connection", "keep-alive") }, http.StatusUpgradeRequired},
		{"POST", "POST", func(http.Header) {}, http.StatusMethodNotAllowed},
		{"version 8", "GET", func(h http.Header) { h.Set("Sec-Websocket-Version", "8") }, http.StatusBadRequest},
		{"no key", "GET", func(h http.Header) { h.Del("Sec-Websocket-Key") }, http.StatusBadRequest},
		{"short key", "GET", func(h http.Header) { h.Set("Sec-Websocket-Key", "c2hvcnQ=") }, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, url, nil)
			req.Header = good.Clone()
			tc.change(req.Header)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
	// No subprotocol of ours offered: none chosen, the upgrade still made.
	accepting.Store(true)
	c, resp, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(url, "http"),
		&websocket.DialOptions{Subprotocols: []string{"other"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.CloseNow()
	if p := resp.Header.Get("Sec-WebSocket-Protocol"); p != "" {
		t.Fatalf("subprotocol %q chosen from none of ours", p)
	}
}

// Close with no reader at it reads the browser's close frame itself, past
// a message still in flight, and returns once it has it.
func TestServerCloseWithoutAReaderReadsTheBrowsersClose(t *testing.T) {
	closed := make(chan error, 1)
	url := acceptServer(t, func(c *ServerConn) { closed <- c.Close(4100, "draining") })
	c, br := rawClient(t, url)
	h, p := readServerFrame(t, br)
	if h.OpCode != ws.OpClose || binary.BigEndian.Uint16([]byte(p)) != 4100 || p[2:] != "draining" {
		t.Fatalf("the server sent %v %q, want close 4100 draining", h.OpCode, p)
	}
	write(t, c, clientFrame(ws.OpText, true, "late"), clientFrame(ws.OpClose, true, p))
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after the handshake the browser read %v, want the connection closed", err)
	}
}

// Over TLS (wss://) the connection reads through TLS, not a lean socket,
// and still echoes and closes with its code and reason (the close
// handshake through TLS, then the TCP connection under it dropped).
func TestServerOverTLS(t *testing.T) {
	var wg sync.WaitGroup
	closed := make(chan error, 1)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Accept(w, r, AcceptOptions{})
		if err != nil {
			return
		}
		wg.Add(1)
		defer wg.Done()
		if c.lean != nil {
			t.Error("a TLS connection read as a lean socket")
		}
		binary, data, err := serverRead(c)
		if err == nil {
			err = c.Write(binary, data)
		}
		if err != nil {
			t.Error(err)
		}
		closed <- c.Close(4102, "over")
	}))
	t.Cleanup(wg.Wait)
	t.Cleanup(srv.Close)
	c, _, err := websocket.Dial(context.Background(), "wss"+strings.TrimPrefix(srv.URL, "https"),
		&websocket.DialOptions{HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.CloseNow() }()
	if err := c.Write(context.Background(), websocket.MessageBinary, []byte("secret")); err != nil {
		t.Fatal(err)
	}
	if typ, data, err := c.Read(context.Background()); err != nil || typ != websocket.MessageBinary || string(data) != "secret" {
		t.Fatalf("echo over TLS: %v %q %v", typ, data, err)
	}
	if _, _, err := c.Read(context.Background()); websocket.CloseStatus(err) != 4102 {
		t.Fatalf("the browser read %v, want close 4102", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close over TLS: %v", err)
	}
}

// A header that claims a large frame reserves memory only as the frame's
// bytes arrive: a peer that sends the header of an 8 MiB frame (within
// the limit) and 100 bytes of it, then nothing, holds a few KiB of the
// server while it waits, not 8 MiB.
func TestServerReservesAClaimedFrameOnlyAsItsBytesArrive(t *testing.T) {
	reading := make(chan struct{})
	done := make(chan error, 1)
	url := acceptServer(t, func(c *ServerConn) {
		c.SetReadLimit(16 << 20)
		_, err := c.Next()
		if err == nil {
			close(reading)
			_, err = c.ReadBody(nil)
		}
		done <- err
	})
	c, _ := rawClient(t, url)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var hdr bytes.Buffer
	if err := ws.WriteHeader(&hdr, ws.Header{Fin: true, OpCode: ws.OpBinary, Masked: true, Mask: [4]byte{1, 2, 3, 4}, Length: 8 << 20}); err != nil {
		t.Fatal(err)
	}
	write(t, c, hdr.Bytes(), make([]byte, 100))
	<-reading
	// The reader has taken the 100 bytes and waits for the rest.
	testwait.For(t, "the server to wait for the rest of the frame in ReadBody", func() bool {
		for _, g := range testwait.Stacks() {
			if strings.Contains(g, "(*ServerConn).ReadBody") && strings.Contains(g, "[IO wait") {
				return true
			}
		}
		return false
	})
	runtime.GC() // what the wait's look at the stacks allocated
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 1<<20 {
		t.Errorf("the heap grew %d KiB for a frame of which 100 bytes arrived", grew>>10)
	}
	_ = c.Close()
	if err := <-done; err == nil {
		t.Error("the read of a frame cut short succeeded")
	}
}

// unwrapping is a middleware's ResponseWriter: not a Hijacker itself, it
// gives the one it wraps with Unwrap.
type unwrapping struct{ http.ResponseWriter }

func (u unwrapping) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// Accept takes over a connection through a wrapped ResponseWriter (a
// metrics or tracing middleware's), as net/http's ResponseController
// does, instead of answering 501; and a connection whose owner set no
// read limit refuses a message over DefaultReadLimit (1009) rather than
// reading whatever length a frame claims.
func TestAcceptLooksThroughAWrappedResponseWriterAndLimitsByDefault(t *testing.T) {
	done := make(chan error, 1)
	var wg sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Accept(unwrapping{w}, r, AcceptOptions{Subprotocols: []string{"turnstile.v1"}})
		if err != nil {
			done <- err
			return
		}
		wg.Add(1)
		defer wg.Done()
		defer func() { _ = c.CloseNow() }()
		echo(done)(c)
	}))
	t.Cleanup(wg.Wait)
	t.Cleanup(srv.Close)
	c := coderDial(t, srv.URL)
	ctx := context.Background()
	if err := c.Write(ctx, websocket.MessageText, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, got, err := c.Read(ctx); err != nil || string(got) != "hello" {
		t.Fatalf("echo through a wrapped ResponseWriter: %q, %v", got, err)
	}
	// The server may close on the frame's header before the client has
	// written its payload (a broken pipe): then the close is not read.
	if err := c.Write(ctx, websocket.MessageBinary, make([]byte, DefaultReadLimit+1)); err == nil {
		if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
			t.Fatalf("a message over the default limit: %v, want a 1009 close", err)
		}
	}
	if err := <-done; !errors.Is(err, ErrMessageTooBig) {
		t.Errorf("the server's read ended with %v, want ErrMessageTooBig", err)
	}
}
