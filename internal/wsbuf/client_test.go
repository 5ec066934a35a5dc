package wsbuf

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// readMessage reads the client's next message whole, as the Live adapter
// does: Wait, Next, then Read to io.EOF.
func readMessage(c *Client) ([]byte, error) {
	c.Wait()
	if err := c.Next(); err != nil {
		return nil, err
	}
	var b []byte
	buf := make([]byte, 1000) // smaller than most messages: a message is read in pieces
	for {
		n, err := c.Read(buf)
		b = append(b, buf[:n]...)
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// clientDial dials url with o (zero: no write timeout, no read limit).
func clientDial(t testing.TB, url string, o DialOptions) *Client {
	t.Helper()
	c, err := Dial(context.Background(), url, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// echoSizes are the message sizes the echo tests send: every size to 300,
// and around the edges of a frame's length encodings (125/126,
// 65535/65536), of a chunk, and up to 200 000 bytes.
func echoSizes() []int {
	var sizes []int
	for n := range 301 {
		sizes = append(sizes, n)
	}
	for _, base := range append(leanSizes[:len(leanSizes):len(leanSizes)], chunkSize-14, chunkSize-8, chunkSize, 2*chunkSize, 65535, 65536, 100000, 200000) {
		for d := -3; d <= 3; d++ {
			sizes = append(sizes, base+d)
		}
	}
	return sizes
}

// Every message size from 0 to 200 000 bytes comes back whole and in
// order, over ws:// and over wss:// (TLS verified against a root the
// client was given), and between messages a plain connection holds no
// read chunk.
func TestClientEchoesEveryMessageSize(t *testing.T) {
	plain := echoServer(t, make(chan bool, 8), nil)
	tlsSrv := httptest.NewUnstartedServer(plain.Config.Handler)
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	for name, c := range map[string]*Client{
		"ws":  clientDial(t, "ws"+strings.TrimPrefix(plain.URL, "http"), DialOptions{}),
		"wss": clientDial(t, "wss"+strings.TrimPrefix(tlsSrv.URL, "https"), DialOptions{TLSConfig: trusting(tlsSrv)}),
	} {
		t.Run(name, func(t *testing.T) {
			if _, ok := c.conn.(*tls.Conn); ok != (name == "wss") {
				t.Fatalf("%s: connection is %T", name, c.conn)
			}
			for i, n := range echoSizes() {
				msg := bytes.Repeat([]byte{byte('a' + i%26)}, n)
				if err := c.WriteText(msg); err != nil {
					t.Fatalf("write %d bytes: %v", n, err)
				}
				got, err := readMessage(c)
				if err != nil {
					t.Fatalf("read the echo of %d bytes: %v", n, err)
				}
				if !bytes.Equal(got, msg) {
					t.Fatalf("the echo of %d bytes came back as %d different bytes", n, len(got))
				}
				if c.lean != nil && c.lean.in != nil {
					t.Fatalf("after echoing %d bytes the connection still holds a read chunk", n)
				}
			}
		})
	}
}

// trusting is a TLS configuration that trusts srv's certificate.
func trusting(srv *httptest.Server) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return &tls.Config{RootCAs: pool}
}

// Over wss:// the URL's host goes as SNI and the server's certificate is
// verified against it: a certificate from an unknown authority, or one
// for another name, fails the dial.
func TestClientVerifiesTheServersCertificateForTheURLsHost(t *testing.T) {
	var mu sync.Mutex
	var sni []string
	srv := httptest.NewUnstartedServer(echoServer(t, make(chan bool, 8), nil).Config.Handler)
	srv.TLS = &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		mu.Lock()
		sni = append(sni, h.ServerName)
		mu.Unlock()
		return nil, nil
	}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	// The system's roots do not know the test authority.
	_, err := Dial(context.Background(), "wss://127.0.0.1:"+port, DialOptions{ReadLimit: 1 << 10})
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); !ok {
		t.Errorf("dial with the system's roots = %v, want a certificate verification error", err)
	}
	// The certificate is for example.com and 127.0.0.1, not localhost.
	_, err = Dial(context.Background(), "wss://localhost:"+port, DialOptions{ReadLimit: 1 << 10, TLSConfig: trusting(srv)})
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); !ok {
		t.Errorf("dial of localhost with a certificate for 127.0.0.1 = %v, want a certificate verification error", err)
	}
	c := clientDial(t, "wss://127.0.0.1:"+port, DialOptions{TLSConfig: trusting(srv)})
	if err := c.WriteText([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	if got, err := readMessage(c); err != nil || string(got) != "hi" {
		t.Fatalf("echo = %q, %v", got, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sni) < 2 || sni[1] != "localhost" {
		t.Errorf("SNI sent = %q, want \"localhost\" for the dial of localhost", sni)
	}
}

// rawWS serves one WebSocket connection by hand: handle gets the upgraded
// connection (frames written with ws.WriteFrame, unmasked as a server's).
func rawWS(t testing.TB, handle func(c net.Conn, br *bufio.Reader)) string {
	t.Helper()
	return "ws://" + rawServer(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := (ws.Upgrader{}).Upgrade(struct {
			io.Reader
			io.Writer
		}{br, c}); err != nil {
			return
		}
		handle(c, br)
	})
}

// rawServer accepts one TCP connection on a loopback port and hands it to
// serve (with a reader over it); it returns the address. The test's
// cleanup closes the listener and waits for serve to return.
func rawServer(t testing.TB, serve func(c net.Conn, br *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
	})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer func() { _ = c.Close() }()
		serve(c, bufio.NewReader(c))
	}()
	return ln.Addr().String()
}

// readClientFrame reads one frame from the client and unmasks it.
func readClientFrame(r io.Reader) (ws.Header, []byte, error) {
	h, err := ws.ReadHeader(r)
	if err != nil {
		return h, nil, err
	}
	p := make([]byte, h.Length)
	if _, err := io.ReadFull(r, p); err != nil {
		return h, nil, err
	}
	if !h.Masked {
		return h, p, errors.New("the client sent an unmasked frame")
	}
	ws.Cipher(p, h.Mask, 0)
	return h, p, nil
}

func frameOf(op ws.OpCode, fin bool, p string) ws.Frame { return ws.NewFrame(op, fin, []byte(p)) }

// A message the server sends in fragments, with a ping and a pong between
// them, is read whole; the ping is answered with a pong carrying its
// payload.
func TestClientReassemblesAFragmentedMessageAroundControlFrames(t *testing.T) {
	pong := make(chan string, 1)
	url := rawWS(t, func(c net.Conn, br *bufio.Reader) {
		for _, f := range []ws.Frame{
			frameOf(ws.OpText, false, "hel"),
			frameOf(ws.OpPing, true, "are you there"),
			frameOf(ws.OpContinuation, false, "lo "),
			frameOf(ws.OpPong, true, "unasked"),
			frameOf(ws.OpContinuation, false, ""),
			frameOf(ws.OpContinuation, true, "world"),
			frameOf(ws.OpBinary, true, "next"),
		} {
			if ws.WriteFrame(c, f) != nil {
				return
			}
		}
		h, p, err := readClientFrame(br)
		if err == nil && h.OpCode == ws.OpPong {
			pong <- string(p)
		}
		close(pong)
		_, _ = io.Copy(io.Discard, br)
	})
	c := clientDial(t, url, DialOptions{})
	for _, want := range []string{"hello world", "next"} {
		got, err := readMessage(c)
		if err != nil || string(got) != want {
			t.Fatalf("message = %q, %v; want %q", got, err, want)
		}
	}
	if p := <-pong; p != "are you there" {
		t.Errorf("the ping was answered with %q, want a pong with its payload", p)
	}
}

// A close frame's code and reason reach the reader, and the close is
// answered with the same code; one without a code reads as 1005.
func TestClientReadsTheServersCloseCodeAndReason(t *testing.T) {
	for _, tc := range []struct {
		payload []byte
		code    int
		reason  string
	}{
		{ws.NewCloseFrameBody(1011, "Internal error occurred."), 1011, "Internal error occurred."},
		{ws.NewCloseFrameBody(1013, "try again later"), 1013, "try again later"},
		{ws.NewCloseFrameBody(4000, ""), 4000, ""},
		{nil, 1005, ""},
	} {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			reply := make(chan []byte, 1)
			after := make(chan error, 1)
			url := rawWS(t, func(c net.Conn, br *bufio.Reader) {
				_ = ws.WriteFrame(c, frameOf(ws.OpText, true, "before"))
				_ = ws.WriteFrame(c, ws.NewCloseFrame(tc.payload))
				h, p, err := readClientFrame(br)
				if err == nil && h.OpCode == ws.OpClose {
					reply <- p
				}
				close(reply)
				h, _, err = readClientFrame(br) // the client's next frame: none, the connection ends
				if err == nil {
					err = fmt.Errorf("a frame (opcode %d) after the close", h.OpCode)
				}
				after <- err
			})
			c := clientDial(t, url, DialOptions{})
			if got, err := readMessage(c); err != nil || string(got) != "before" {
				t.Fatalf("first message = %q, %v", got, err)
			}
			_, err := readMessage(c)
			ce, ok := errors.AsType[*CloseError](err)
			if !ok || ce.Code != tc.code || ce.Reason != tc.reason {
				t.Fatalf("read = %v, want *CloseError{%d, %q}", err, tc.code, tc.reason)
			}
			p, ok := <-reply
			if !ok {
				t.Fatal("the close was not answered")
			}
			if code, _ := ws.ParseCloseFrameData(p); tc.code != 1005 && int(code) != tc.code || tc.code == 1005 && len(p) != 0 {
				t.Errorf("the close was answered with %x, want the same code", p)
			}
			if err := c.WriteText([]byte("late")); !errors.Is(err, ErrCloseSent) {
				t.Errorf("a write after the close = %v, want ErrCloseSent", err)
			}
			_ = c.Close()
			if err := <-after; err != io.EOF {
				t.Errorf("after the close the server read %v, want the end of the connection", err)
			}
		})
	}
}

// A message longer than the read limit, in one frame or in fragments,
// fails the read (the server is told 1009) instead of being read.
func TestClientRefusesAMessageOverTheReadLimit(t *testing.T) {
	for name, frames := range map[string][]ws.Frame{
		"one frame":    {frameOf(ws.OpBinary, true, strings.Repeat("x", 101))},
		"fragmented":   {frameOf(ws.OpBinary, false, strings.Repeat("x", 60)), frameOf(ws.OpContinuation, true, strings.Repeat("x", 41))},
		"at the limit": {frameOf(ws.OpBinary, false, strings.Repeat("x", 60)), frameOf(ws.OpContinuation, true, strings.Repeat("x", 40))},
	} {
		t.Run(name, func(t *testing.T) {
			reply := make(chan ws.StatusCode, 1)
			url := rawWS(t, func(c net.Conn, br *bufio.Reader) {
				for _, f := range frames {
					_ = ws.WriteFrame(c, f)
				}
				h, p, err := readClientFrame(br)
				if err == nil && h.OpCode == ws.OpClose {
					code, _ := ws.ParseCloseFrameData(p)
					reply <- code
				}
				close(reply)
			})
			c := clientDial(t, url, DialOptions{ReadLimit: 100})
			got, err := readMessage(c)
			if name == "at the limit" {
				if err != nil || len(got) != 100 {
					t.Fatalf("a message of the read limit: %d bytes, %v", len(got), err)
				}
				return
			}
			if !errors.Is(err, ErrMessageTooBig) {
				t.Fatalf("read of a 101-byte message with a limit of 100 = %d bytes, %v; want ErrMessageTooBig", len(got), err)
			}
			if code := <-reply; code != ws.StatusMessageTooBig {
				t.Errorf("the server was told %d, want 1009", code)
			}
		})
	}
}

// A frame that came in the same segment as the handshake's response (a
// server may speak first) is read without waiting for more.
func TestClientReadsAFrameThatCameWithTheHandshake(t *testing.T) {
	addr := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		resp := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
			"Sec-WebSocket-Accept: " + acceptKey(req.Header.Get("Sec-WebSocket-Key")) + "\r\n\r\n"
		if _, err := c.Write(append([]byte(resp), 0x81, 2, 'h', 'i')); err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, br)
	})
	c := clientDial(t, "ws://"+addr, DialOptions{})
	if got, err := readMessage(c); err != nil || string(got) != "hi" {
		t.Fatalf("read = %q, %v; want \"hi\"", got, err)
	}
}

// A reader waiting for its next message over plain TCP waits in Wait, on
// its own shallow stack and holding no read chunk, and gets the message
// once it comes.
func TestClientWaitsForItsNextMessageHoldingNoBuffer(t *testing.T) {
	send := make(chan struct{})
	url := rawWS(t, func(c net.Conn, br *bufio.Reader) {
		<-send
		_ = ws.WriteFrame(c, frameOf(ws.OpText, true, "hello"))
		_, _ = io.Copy(io.Discard, br)
	})
	c := clientDial(t, url, DialOptions{})
	if c.lean == nil {
		t.Skip("no lean reads here (no raw socket)")
	}
	got := make(chan []byte, 1)
	go func() {
		m, _ := readMessage(c)
		got <- m
	}()
	testwait.ForNil(t, "the reader to wait in Wait", func() error {
		st := testwait.StackWith("wsbuf.readMessage")
		if !strings.Contains(st, "wsbuf.(*Client).Wait") {
			return fmt.Errorf("its stack:\n%s", st)
		}
		return nil
	})
	if c.lean.in != nil {
		t.Error("the waiting reader holds a read chunk")
	}
	close(send)
	if m := <-got; string(m) != "hello" {
		t.Fatalf("got %q", m)
	}
}

// A server that stops reading makes a write fail once the write timeout
// has passed, with os.ErrDeadlineExceeded, and every later write with it.
func TestClientWriteTimesOutWhenTheServerStopsReading(t *testing.T) {
	stop := make(chan struct{})
	url := rawWS(t, func(net.Conn, *bufio.Reader) { <-stop })
	t.Cleanup(func() { close(stop) })
	c := clientDial(t, url, DialOptions{WriteTimeout: 50 * time.Millisecond})
	msg := make([]byte, 64<<10)
	var err error
	for range 100000 {
		if err = c.WriteText(msg); err != nil {
			break
		}
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("writes to a server that does not read = %v, want os.ErrDeadlineExceeded", err)
	}
	if again := c.WriteText([]byte("x")); !errors.Is(again, os.ErrDeadlineExceeded) {
		t.Errorf("the next write = %v, want the same error", again)
	}
}

// A handshake the server refuses fails with its status.
func TestClientDialReportsARefusedHandshakesStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no key", http.StatusForbidden)
	}))
	t.Cleanup(srv.Close)
	_, err := Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), DialOptions{ReadLimit: 1})
	he, ok := errors.AsType[*HandshakeError](err)
	if !ok || he.StatusCode != http.StatusForbidden || he.Status != "403 Forbidden" {
		t.Fatalf("dial = %v, want a *HandshakeError 403 Forbidden", err)
	}
}

// Through an HTTP proxy (as HTTPS_PROXY names one) the connection is a
// CONNECT tunnel, with the proxy URL's credentials, over which ws:// and
// wss:// (TLS to the server, through the tunnel) both echo.
func TestClientDialsThroughAProxy(t *testing.T) {
	plain := echoServer(t, make(chan bool, 8), nil)
	tlsSrv := httptest.NewUnstartedServer(plain.Config.Handler)
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	var mu sync.Mutex
	var tunnels []string
	tunnel := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect ||
			r.Header.Get("Proxy-Authorization") != "Basic "+base64.StdEncoding.EncodeToString([]byte("u:p w")) {
			http.Error(w, "no", http.StatusProxyAuthRequired)
			return
		}
		up, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer func() { _ = up.Close() }()
		mu.Lock()
		tunnels = append(tunnels, r.Host)
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
		down, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer func() { _ = down.Close() }()
		go func() {
			_, _ = io.Copy(up, brw)
			_ = up.(*net.TCPConn).CloseWrite()
		}()
		_, _ = io.Copy(down, up)
	})
	proxy := httptest.NewServer(tunnel)
	t.Cleanup(proxy.Close)
	// An https proxy, its certificate from the roots the dial is given.
	tlsProxy := httptest.NewUnstartedServer(tunnel)
	tlsProxy.StartTLS()
	t.Cleanup(tlsProxy.Close)
	pu, _ := url.Parse(proxy.URL)
	pu.User = url.UserPassword("u", "p w")
	viaProxy := func(*http.Request) (*url.URL, error) { return pu, nil }
	tpu, _ := url.Parse(tlsProxy.URL)
	tpu.User = pu.User
	viaTLSProxy := func(*http.Request) (*url.URL, error) { return tpu, nil }

	for name, target := range map[string]struct {
		url   string
		proxy func(*http.Request) (*url.URL, error)
		tls   *tls.Config
	}{
		"ws":                  {"ws" + strings.TrimPrefix(plain.URL, "http"), viaProxy, nil},
		"wss":                 {"wss" + strings.TrimPrefix(tlsSrv.URL, "https"), viaProxy, trusting(tlsSrv)},
		"ws via https proxy":  {"ws" + strings.TrimPrefix(plain.URL, "http"), viaTLSProxy, trusting(tlsProxy)},
		"wss via https proxy": {"wss" + strings.TrimPrefix(tlsSrv.URL, "https"), viaTLSProxy, trusting(tlsSrv)},
	} {
		c := clientDial(t, target.url, DialOptions{Proxy: target.proxy, TLSConfig: target.tls})
		for _, n := range []int{3, 70000} {
			msg := bytes.Repeat([]byte("p"), n)
			if err := c.WriteText(msg); err != nil {
				t.Fatalf("%s: write: %v", name, err)
			}
			if got, err := readMessage(c); err != nil || !bytes.Equal(got, msg) {
				t.Fatalf("%s: echo of %d bytes = %d bytes, %v", name, n, len(got), err)
			}
		}
		_ = c.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(tunnels) != 4 {
		t.Errorf("tunnels through the proxy = %v, want one per dial", tunnels)
	}
	pu.User = url.UserPassword("u", "wrong")
	if _, err := Dial(context.Background(), "ws"+strings.TrimPrefix(plain.URL, "http"),
		DialOptions{Proxy: viaProxy, ReadLimit: 1}); err == nil || !strings.Contains(err.Error(), "407") {
		t.Errorf("dial with the wrong proxy credentials = %v, want the proxy's 407", err)
	}
}

// Through a SOCKS5 proxy (HTTPS_PROXY=socks5://user:password@host) the
// connection is the proxy's, with the proxy URL's credentials.
func TestClientDialsThroughASOCKS5Proxy(t *testing.T) {
	plain := echoServer(t, make(chan bool, 8), nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { socks5(c) })
		}
	})
	pu := &url.URL{Scheme: "socks5", Host: ln.Addr().String(), User: url.UserPassword("u", "pw")}
	c := clientDial(t, "ws"+strings.TrimPrefix(plain.URL, "http"),
		DialOptions{Proxy: func(*http.Request) (*url.URL, error) { return pu, nil }})
	if err := c.WriteText([]byte("via socks")); err != nil {
		t.Fatal(err)
	}
	if got, err := readMessage(c); err != nil || string(got) != "via socks" {
		t.Fatalf("echo = %q, %v", got, err)
	}
	_ = c.Close()
}

// socks5 serves one SOCKS5 connection (RFC 1928, user "u" password "pw"
// per RFC 1929), a CONNECT to a host:port, and pipes it.
func socks5(c net.Conn) {
	defer func() { _ = c.Close() }()
	br := bufio.NewReader(c)
	next := func(n int) []byte {
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return nil
		}
		return b
	}
	if h := next(2); h == nil || next(int(h[1])) == nil {
		return
	}
	_, _ = c.Write([]byte{5, 2}) // username/password
	ver := next(2)
	if ver == nil {
		return
	}
	user := string(next(int(ver[1])))
	pass := string(next(int(next(1)[0])))
	if user != "u" || pass != "pw" {
		_, _ = c.Write([]byte{1, 1})
		return
	}
	_, _ = c.Write([]byte{1, 0})
	req := next(4) // 5, CONNECT, 0, address type
	if req == nil {
		return
	}
	var host string
	switch req[3] {
	case 1:
		host = net.IP(next(4)).String()
	case 3:
		host = string(next(int(next(1)[0])))
	default:
		return
	}
	port := next(2)
	up, err := net.Dial("tcp", net.JoinHostPort(host, fmt.Sprint(int(port[0])<<8|int(port[1]))))
	if err != nil {
		_, _ = c.Write([]byte{5, 5, 0, 1, 0, 0, 0, 0, 0, 0})
		return
	}
	defer func() { _ = up.Close() }()
	_, _ = c.Write([]byte{5, 0, 0, 1, 0, 0, 0, 0, 0, 0})
	go func() {
		_, _ = io.Copy(up, br)
		_ = up.(*net.TCPConn).CloseWrite()
	}()
	_, _ = io.Copy(c, up)
}

// NetDial, when set, opens the connection the client speaks over (and
// echoes go through it).
func TestClientDialsThroughNetDial(t *testing.T) {
	srv := echoServer(t, make(chan bool, 8), nil)
	var dialled []string
	o := DialOptions{NetDial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialled = append(dialled, addr)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	c := clientDial(t, "ws"+strings.TrimPrefix(srv.URL, "http"), o)
	if len(dialled) != 1 || dialled[0] != strings.TrimPrefix(srv.URL, "http://") {
		t.Fatalf("NetDial asked for %q, want the server's address once", dialled)
	}
	if err := c.WriteText([]byte("through")); err != nil {
		t.Fatal(err)
	}
	if got, err := readMessage(c); err != nil || string(got) != "through" {
		t.Fatalf("echo %q, %v", got, err)
	}
}
