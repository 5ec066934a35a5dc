package wsbuf

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gobwas/ws"
	xproxy "golang.org/x/net/proxy"

	"github.com/turnstile-gw/turnstile/internal/evloop"
)

// DialOptions tune Dial.
type DialOptions struct {
	// Header goes with the handshake request.
	Header http.Header
	// WriteTimeout bounds every write: a frame the peer does not take
	// within it (at most twice it) fails with os.ErrDeadlineExceeded;
	// 0: no bound.
	WriteTimeout time.Duration
	// ReadLimit is the largest message Read returns; a longer one fails
	// with ErrMessageTooBig; 0: no limit.
	ReadLimit int64
	// Proxy, if not nil, names the proxy for a request to the URL's host
	// (as http.Transport's Proxy: the wss URL asked as https, ws as http),
	// nil for none; http.ProxyFromEnvironment reads HTTPS_PROXY,
	// HTTP_PROXY and NO_PROXY. The connection goes through an http or
	// https proxy with CONNECT, with the proxy URL's user and password as
	// basic Proxy-Authorization, or through a socks5 one with them.
	Proxy func(*http.Request) (*url.URL, error)
	// TLSConfig is the TLS configuration of a wss URL (nil: the system's
	// roots); its ServerName, if empty, is the URL's host, sent as SNI and
	// verified against the certificate.
	TLSConfig *tls.Config
	// NetDial, if not nil, opens the TCP connection in place of a
	// net.Dialer when there is no proxy (cmd/relayfloor's loops dial
	// sockets they take out of Go's poller).
	NetDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Loop, when set, serves the connection from that event loop once
	// the handshake is done (Linux; see loop.go): ws://, or wss:// with
	// TLS fed by the loop (loop_tls.go); not through an https proxy (TLS
	// to the proxy), which is served as without it.
	Loop *evloop.Loop
}

// Dial opens a WebSocket client connection to a ws:// or wss:// URL,
// without compression or subprotocol; ctx bounds the TCP connect, a
// proxy's CONNECT, the TLS and the WebSocket handshakes. A refused handshake fails with a
// *HandshakeError carrying the response's status.
func Dial(ctx context.Context, rawURL string, o DialOptions) (*Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "ws" && u.Scheme != "wss" {
		return nil, fmt.Errorf("websocket: dial %s: the scheme is not ws or wss", rawURL)
	}
	proxy, err := proxyFor(o.Proxy, u)
	if err != nil {
		return nil, fmt.Errorf("websocket: proxy: %w", err)
	}
	var sock net.Conn // the TCP connection, once dialled (under TLS to an https proxy)
	var feed *tlsFeed // over sock, under TLS that may go to the loop
	var refused *HandshakeError
	onLoop := o.Loop != nil && evloop.Supported
	d := ws.Dialer{
		Header: ws.HandshakeHeaderHTTP(o.Header),
		NetDial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if o.NetDial != nil && proxy == nil {
				c, err := o.NetDial(ctx, network, addr)
				sock = c
				return c, err
			}
			c, raw, err := dialTCP(ctx, network, addr, proxy, o.TLSConfig)
			sock = raw
			return c, err
		},
		TLSClient: tlsClient(tlsFor(o.TLSConfig, u.Hostname()), &sock, onLoop, &feed),
		OnStatusError: func(status int, reason []byte, _ io.Reader) {
			refused = &HandshakeError{StatusCode: status, Status: fmt.Sprintf("%d %s", status, reason)}
		},
	}
	conn, br, _, err := d.Dial(ctx, u.String())
	if err != nil {
		if refused != nil {
			return nil, refused
		}
		return nil, err
	}
	limit := o.ReadLimit
	if limit <= 0 {
		limit = math.MaxInt64
	}
	c := &Client{sock: sock, conn: conn, pre: br, limit: limit, timeout: o.WriteTimeout}
	if onLoop && (conn == sock || feed != nil) {
		var pending []byte
		if br != nil {
			pending, _ = br.Peek(br.Buffered())
			pending = append([]byte(nil), pending...)
			ws.PutReader(br)
		}
		if feed != nil {
			err = c.attachTLS(o.Loop, feed, pending)
		} else {
			err = c.attach(o.Loop, pending)
		}
		if err != nil {
			return nil, fmt.Errorf("websocket: event loop: %w", err)
		}
		return c, nil
	}
	if conn == sock {
		c.lean = newSockReader(sock)
	}
	return c, nil
}

// HandshakeError is a handshake the server answered with another status
// than 101.
type HandshakeError struct {
	StatusCode int
	Status     string // e.g. "403 Forbidden"
}

func (e *HandshakeError) Error() string {
	return "websocket: the server refused the handshake: HTTP " + e.Status
}

// tcpDialer dials the server or the proxy.
var tcpDialer = net.Dialer{KeepAlive: 30 * time.Second}

// proxyFor is the proxy for u, or nil.
func proxyFor(proxy func(*http.Request) (*url.URL, error), u *url.URL) (*url.URL, error) {
	if proxy == nil {
		return nil, nil
	}
	scheme := "http"
	if u.Scheme == "wss" {
		scheme = "https"
	}
	return proxy(&http.Request{Method: http.MethodGet, URL: &url.URL{Scheme: scheme, Host: u.Host, Path: u.Path},
		Header: http.Header{}, Host: u.Host})
}

// tlsFor is cfg (nil: the system's roots) naming host for SNI and the
// certificate's check when it names none: the host without an IPv6
// literal's brackets, which the handshake library would keep.
func tlsFor(cfg *tls.Config, host string) *tls.Config {
	if cfg == nil {
		return &tls.Config{ServerName: host}
	}
	if cfg.ServerName != "" {
		return cfg
	}
	cfg = cfg.Clone()
	cfg.ServerName = host
	return cfg
}

// dialTCP connects to addr, directly or through proxy with CONNECT; it
// returns the connection to speak on and the TCP connection under it
// (the same but through an https proxy, where TLS to the proxy, made with
// cfg's roots, is between them).
func dialTCP(ctx context.Context, network, addr string, proxy *url.URL, cfg *tls.Config) (conn, raw net.Conn, err error) {
	if proxy == nil {
		c, err := tcpDialer.DialContext(ctx, network, addr)
		return c, c, err
	}
	var port string
	switch proxy.Scheme {
	case "http":
		port = "80"
	case "https":
		port = "443"
	case "socks5", "socks5h":
		c, err := dialSOCKS(ctx, network, addr, proxy)
		return c, c, err
	default:
		return nil, nil, fmt.Errorf("websocket: proxy %s: only http, https and socks5 proxies are supported", proxy.Redacted())
	}
	paddr := proxy.Host
	if proxy.Port() == "" {
		paddr = net.JoinHostPort(proxy.Hostname(), port)
	}
	raw, err = tcpDialer.DialContext(ctx, network, paddr)
	if err != nil {
		return nil, nil, err
	}
	conn = raw
	if proxy.Scheme == "https" {
		tc := tls.Client(raw, tlsFor(cfg, proxy.Hostname()))
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = raw.Close()
			return nil, nil, err
		}
		conn = tc
	}
	if err := connect(ctx, conn, addr, proxy); err != nil {
		_ = raw.Close()
		return nil, nil, fmt.Errorf("websocket: proxy %s: %w", proxy.Redacted(), err)
	}
	return conn, raw, nil
}

// dialSOCKS connects to addr through a SOCKS5 proxy, with the proxy URL's
// user and password (and port 1080 when it names none), as http.Transport
// does for a socks5 proxy.
func dialSOCKS(ctx context.Context, network, addr string, proxy *url.URL) (net.Conn, error) {
	d, err := xproxy.FromURL(proxy, &tcpDialer)
	if err != nil {
		return nil, err
	}
	c, err := d.(xproxy.ContextDialer).DialContext(ctx, network, addr)
	if err != nil {
		return nil, fmt.Errorf("websocket: proxy %s: %w", proxy.Redacted(), err)
	}
	return c, nil
}

// connect asks the proxy on c for a tunnel to addr.
func connect(ctx context.Context, c net.Conn, addr string, proxy *url.URL) error {
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
		defer func() { _ = c.SetDeadline(time.Time{}) }()
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	var req strings.Builder
	req.WriteString("CONNECT " + addr + " HTTP/1.1\r\nHost: " + addr + "\r\n")
	if u := proxy.User; u != nil {
		pass, _ := u.Password()
		req.WriteString("Proxy-Authorization: Basic " +
			base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+pass)) + "\r\n")
	}
	req.WriteString("\r\n")
	if _, err := io.WriteString(c, req.String()); err != nil {
		return err
	}
	// The response is read a byte at a time, so that nothing past it (the
	// server's first bytes) is taken from the tunnel.
	resp, err := http.ReadResponse(bufio.NewReaderSize(byteReader{c}, 16), &http.Request{Method: http.MethodConnect})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	// The body is not closed: a 2xx CONNECT has none, and closing one of
	// unknown length would read the tunnel.
	if resp.StatusCode != http.StatusOK {
		return errors.New("CONNECT answered " + resp.Status)
	}
	return nil
}

// byteReader reads one byte at a time.
type byteReader struct{ r io.Reader }

func (b byteReader) Read(p []byte) (int, error) { return b.r.Read(p[:min(len(p), 1)]) }
