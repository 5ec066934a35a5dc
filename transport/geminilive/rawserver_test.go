package geminilive_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"
)

// rawServer is a bare WebSocket endpoint for the misbehaving upstreams the
// fake Gemini server does not model: one that never completes the setup,
// one that stops reading. Each connection runs handle after the client's
// setup frame has been read; ctx ends when stop is called.
type rawServer struct {
	addr   string
	srv    *httptest.Server
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

func startRaw(t testing.TB, handle func(ctx context.Context, c *websocket.Conn)) *rawServer {
	t.Helper()
	return startRawOver(t, false, handle)
}

// startRawOver is startRaw, over TLS (wss://, its certificate in
// rs.srv.Certificate()) when tls is set.
func startRawOver(t testing.TB, tls bool, handle func(ctx context.Context, c *websocket.Conn)) *rawServer {
	t.Helper()
	rs := &rawServer{}
	rs.ctx, rs.cancel = context.WithCancel(context.Background())
	rs.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.wg.Add(1)
		defer rs.wg.Done()
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer func() { _ = c.CloseNow() }()
		if _, _, err := c.Read(rs.ctx); err != nil {
			return
		}
		handle(rs.ctx, c)
	}))
	if tls {
		rs.srv.StartTLS()
	} else {
		rs.srv.Start()
	}
	rs.addr = strings.TrimPrefix(strings.TrimPrefix(rs.srv.URL, "http://"), "https://")
	t.Cleanup(rs.stop)
	return rs
}

// stop ends every handler (which drops its connection) and the server.
func (rs *rawServer) stop() {
	rs.once.Do(func() {
		rs.cancel()
		rs.wg.Wait()
		rs.srv.Close()
	})
}

// setupComplete is the reply that lets the SDK's Connect return.
func setupComplete(ctx context.Context, c *websocket.Conn) error {
	return c.Write(ctx, websocket.MessageBinary, []byte(`{"setupComplete":{}}`))
}
