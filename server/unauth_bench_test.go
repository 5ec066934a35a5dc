package server

import (
	"bufio"
	"net"
	"net/http"
	"testing"
)

// The cost the unauthenticated-connection limits add to a keep-alive
// request (two state changes, an idle timer) and to a connection (admit,
// release): off, a plain http.Server on the bare listener; on, the public
// server on LimitListener with every limit set.
func BenchmarkUnauthLimits(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		s := newTestServer(b, Config{Edge: Edge{MaxConnections: 1 << 16, UnauthPerIP: 1 << 10, UnauthShare: 0.5}}, hsAuth(b))
		srv, wrap := s.httpServer(s.Handler()), func(ln net.Listener) net.Listener { return ln }
		if on {
			srv, wrap = s.PublicServer(), s.LimitListener
		}
		addr := serve(b, srv, wrap)
		b.Run(name+"/request", func(b *testing.B) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			r := bufio.NewReader(c)
			b.ReportAllocs()
			for b.Loop() {
				benchGet(b, c, r)
			}
		})
		b.Run(name+"/connection", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					b.Fatal(err)
				}
				benchGet(b, c, bufio.NewReader(c))
				_ = c.Close()
			}
		})
	}
}

func benchGet(b *testing.B, c net.Conn, r *bufio.Reader) {
	if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")); err != nil {
		b.Fatal(err)
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		b.Fatal(err)
	}
	_ = resp.Body.Close()
}
