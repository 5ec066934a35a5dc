package wsbuf

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"
)

// recBody records what reaches a dialled connection's body from above:
// the length of every read asked for, and every write.
type recBody struct {
	io.ReadWriteCloser
	mu     sync.Mutex
	reads  []int
	writes [][]byte
}

func (r *recBody) Read(p []byte) (int, error) {
	r.mu.Lock()
	r.reads = append(r.reads, len(p))
	r.mu.Unlock()
	return r.ReadWriteCloser.Read(p)
}

func (r *recBody) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.writes = append(r.writes, bytes.Clone(p))
	r.mu.Unlock()
	return r.ReadWriteCloser.Write(p)
}

func (r *recBody) takeWrites() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.writes
	r.writes = nil
	return w
}

// recTransport is the http.Transport under a Transport, recording the
// connection it dialled (made lean for reading) and the handshake's body.
type recTransport struct {
	*http.Transport
	conn net.Conn
	body *recBody
}

func newRecTransport() *recTransport {
	rt := &recTransport{}
	rt.Transport = &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			rt.conn = ReadLean(ctx, c, c)
			return rt.conn, nil
		}}
	return rt
}

func (rt *recTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := rt.Transport.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusSwitchingProtocols {
		rt.body = &recBody{ReadWriteCloser: resp.Body.(io.ReadWriteCloser)}
		resp.Body = rt.body
	}
	return resp, err
}

// recAbove records what the library asks of the body a Transport gave it.
type recAbove struct {
	http.RoundTripper
	body *recBody
}

func (ra *recAbove) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := ra.RoundTripper.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusSwitchingProtocols {
		ra.body = &recBody{ReadWriteCloser: resp.Body.(io.ReadWriteCloser)}
		resp.Body = ra.body
	}
	return resp, err
}

// leanDial dials srv through a Transport over rt, with parking; above,
// if not nil, records what the library asks of the Transport's body.
func leanDial(t testing.TB, srv *httptest.Server, rt *recTransport, above *recAbove) (*websocket.Conn, *Parking) {
	t.Helper()
	var tr http.RoundTripper = &Transport{Base: rt}
	if above != nil {
		above.RoundTripper = tr
		tr = above
	}
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	ctx, pk := WithParking(context.Background(), url)
	ws, _, err := websocket.Dial(ctx, url,
		&websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(1 << 20)
	t.Cleanup(func() { _ = ws.CloseNow() })
	return ws, pk
}

// A dialled connection reads its frames' headers through bufio's smallest
// buffer (the library's first read asks for 16 bytes, not 4096), every
// message size comes back whole, and every frame of up to a chunk reaches
// the socket in one write, a longer one in a write a chunk, however many
// times the library flushed its small buffer.
func TestDialledConnectionEchoesEveryMessageSizeAFrameAWrite(t *testing.T) {
	rt, above := newRecTransport(), &recAbove{}
	ws, _ := leanDial(t, echoServer(t, make(chan bool, 1), nil), rt, above)
	if _, ok := rt.conn.(*readLean); !ok && runtime.GOOS != "windows" {
		t.Fatalf("the dialled TCP connection was not made lean for reading: %T", rt.conn)
	}
	var sizes []int
	for n := range 300 {
		sizes = append(sizes, n)
	}
	for _, base := range []int{clientWriteBufio, directMin, chunkSize - 8, chunkSize - 14, chunkSize, 65535, 65536, 200000} {
		for d := -3; d <= 3; d++ {
			sizes = append(sizes, base+d)
		}
	}
	for i, n := range sizes {
		msg := bytes.Repeat([]byte{byte('a' + i%26)}, n)
		if err := ws.Write(context.Background(), websocket.MessageBinary, msg); err != nil {
			t.Fatalf("write %d bytes: %v", n, err)
		}
		writes := rt.body.takeWrites()
		frame := 0
		for _, w := range writes {
			frame += len(w)
		}
		if most := (frame + chunkSize - 1) / chunkSize; len(writes) > most {
			t.Errorf("a %d-byte message (a %d-byte frame) went out in %d writes, want at most %d", n, frame, len(writes), most)
		}
		typ, got, err := ws.Read(context.Background())
		if err != nil {
			t.Fatalf("read the echo of %d bytes: %v", n, err)
		}
		if typ != websocket.MessageBinary || !bytes.Equal(got, msg) {
			t.Fatalf("echo of %d bytes came back as %d bytes", n, len(got))
		}
	}
	if r := above.body.reads; len(r) == 0 || r[0] != clientReadBufio {
		t.Errorf("the library's reads asked for %v bytes; want the first for %d (its buffer)", r[:min(len(r), 5)], clientReadBufio)
	}
}

// Between messages a dialled connection holds no read chunk and no frame
// being gathered.
func TestDialledConnectionHoldsNoBufferBetweenMessages(t *testing.T) {
	rt := newRecTransport()
	ws, _ := leanDial(t, echoServer(t, make(chan bool, 1), nil), rt, nil)
	rl, ok := rt.conn.(*readLean)
	if !ok {
		t.Skipf("no lean reads here (%T)", rt.conn)
	}
	for _, n := range []int{10, 700, 5000, 70000} {
		if err := ws.Write(context.Background(), websocket.MessageText, make([]byte, n)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ws.Read(context.Background()); err != nil {
			t.Fatal(err)
		}
		if rl.in != nil {
			t.Errorf("after echoing a %d-byte message the connection still held a read chunk", n)
		}
	}
}

// A frame written in pieces of any size, its header split too, goes out
// whole and unchanged, in one write if it fits a chunk (a chunk a write
// if not), and the body
// holds nothing once it is out.
func TestClientBodyGathersAFrameWrittenInPieces(t *testing.T) {
	frame := func(n int) []byte { // a masked binary frame with an n-byte payload
		h := []byte{0x82, 0x80}
		switch {
		case n < 126:
			h[1] |= byte(n)
		case n < 1<<16:
			h = append(h[:1], 0x80|126, byte(n>>8), byte(n))
		default:
			h = append(h[:1], 0x80|127, 0, 0, 0, 0, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
		}
		h = append(h, 1, 2, 3, 4)
		p := make([]byte, n)
		_, _ = rand.Read(p)
		return append(h, p...)
	}
	for _, n := range []int{0, 5, 125, 126, 900, chunkSize - 8, 70000} {
		for _, piece := range []int{1, 3, 16, clientWriteBufio, 1 << 20} {
			f := frame(n)
			var sink recBody
			sink.ReadWriteCloser = nopRWC{}
			b := &clientBody{rwc: &sink}
			for rest := f; len(rest) > 0; {
				k := min(piece, len(rest))
				if m, err := b.Write(rest[:k]); m != k || err != nil {
					t.Fatalf("Write = %d, %v", m, err)
				}
				rest = rest[k:]
			}
			got := bytes.Join(sink.writes, nil)
			if !bytes.Equal(got, f) {
				t.Fatalf("a %d-byte frame in %d-byte pieces went out as %d different bytes", len(f), piece, len(got))
			}
			if most := (len(f) + chunkSize - 1) / chunkSize; len(sink.writes) > most {
				t.Errorf("a %d-byte frame in %d-byte pieces went out in %d writes, want at most %d", len(f), piece, len(sink.writes), most)
			}
			if b.out != nil || b.left != 0 || b.nhdr != 0 {
				t.Errorf("after a %d-byte frame in %d-byte pieces the body still holds a buffer or a frame", len(f), piece)
			}
		}
	}
}

type nopRWC struct{}

func (nopRWC) Read([]byte) (int, error)    { return 0, io.EOF }
func (nopRWC) Write(p []byte) (int, error) { return len(p), nil }
func (nopRWC) Close() error                { return nil }

// Over TLS (as to Google) the frames are gathered above TLS: a frame goes
// out as one TLS record, and every size comes back whole.
func TestDialledConnectionOverTLSEchoes(t *testing.T) {
	srv := httptest.NewUnstartedServer(echoServer(t, make(chan bool, 1), nil).Config.Handler)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	rt := newRecTransport()
	rt.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig
	url := "wss" + strings.TrimPrefix(srv.URL, "https")
	ctx, pk := WithParking(context.Background(), url) // as the Live adapter dials
	if pk != nil {
		t.Fatal("a connection over TLS has a Parking: its socket's bytes are TLS records, not frames")
	}
	ws, _, err := websocket.Dial(ctx, url,
		&websocket.DialOptions{HTTPClient: &http.Client{Transport: &Transport{Base: rt}}})
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(1 << 20)
	t.Cleanup(func() { _ = ws.CloseNow() })
	for _, n := range []int{0, 100, 900, chunkSize + 1, 70000} {
		msg := bytes.Repeat([]byte{'x'}, n)
		if err := ws.Write(context.Background(), websocket.MessageText, msg); err != nil {
			t.Fatalf("write %d bytes: %v", n, err)
		}
		if w := rt.body.takeWrites(); len(w) > (n+14+chunkSize-1)/chunkSize {
			t.Errorf("a %d-byte message went out in %d writes", n, len(w))
		}
		if _, got, err := ws.Read(context.Background()); err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("echo of %d bytes: %d bytes, %v", n, len(got), err)
		}
	}
	if rl, ok := rt.conn.(*readLean); ok && rl.handshake {
		t.Error("the TLS socket is still read as an HTTP response's header (every read copied and scanned)")
	}
}
