package wsbuf

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer accepts through ResponseWriter and echoes every message.
// lean says whether the connection was made lean; after each echo, held
// says whether the connection then held a read chunk or bytes to write.
func echoServer(t *testing.T, lean, held chan<- bool) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lw := &ResponseWriter{ResponseWriter: w}
		ws, err := websocket.Accept(lw, r, nil)
		if err != nil {
			return
		}
		defer func() { _ = ws.CloseNow() }()
		ws.SetReadLimit(1 << 20)
		lc := lw.lean
		lean <- lc != nil
		for {
			typ, data, err := ws.Read(context.Background())
			if err != nil {
				return
			}
			if ws.Write(context.Background(), typ, data) != nil {
				return
			}
			if held != nil {
				held <- holdsBuffer(lc)
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func dial(t *testing.T, srv *httptest.Server) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(1 << 20)
	t.Cleanup(func() { _ = ws.CloseNow() })
	return ws
}

// Every message size, around the held buffer's edges and the pooled
// chunk's, text and binary, comes back whole and in order: a frame that
// leaves bytes held back would stall here.
func TestLeanConnEchoesEveryMessageSizeWhole(t *testing.T) {
	lean := make(chan bool, 1)
	ws := dial(t, echoServer(t, lean, nil))
	if !<-lean {
		if leanSizes == nil {
			t.Skip("no lean connections on " + runtime.GOOS)
		}
		t.Fatal("a plain TCP connection was not made lean")
	}
	var sizes []int
	for n := range 300 {
		sizes = append(sizes, n)
	}
	for _, base := range append(leanSizes[:len(leanSizes):len(leanSizes)], chunkSize, 2*chunkSize, 65535, 65536, 200000) {
		for d := -3; d <= 3; d++ {
			sizes = append(sizes, base+d)
		}
	}
	for i, n := range sizes {
		msg := bytes.Repeat([]byte{byte('a' + i%26)}, n)
		typ := websocket.MessageBinary
		if i%2 == 0 {
			typ = websocket.MessageText
		}
		if err := ws.Write(context.Background(), typ, msg); err != nil {
			t.Fatalf("write %d bytes: %v", n, err)
		}
		gotTyp, got, err := ws.Read(context.Background())
		if err != nil {
			t.Fatalf("read the echo of %d bytes: %v", n, err)
		}
		if gotTyp != typ || !bytes.Equal(got, msg) {
			t.Fatalf("echo of %d bytes came back as %d bytes (type %v, want %v)", n, len(got), gotTyp, typ)
		}
	}
}

// Between messages the connection holds no read chunk and nothing held
// back to write: an idle connection costs no buffer of 4 KiB.
func TestLeanConnHoldsNoBufferBetweenMessages(t *testing.T) {
	lean, held := make(chan bool, 1), make(chan bool, 1)
	ws := dial(t, echoServer(t, lean, held))
	<-lean
	for _, n := range []int{10, 700, 5000} {
		if err := ws.Write(context.Background(), websocket.MessageBinary, make([]byte, n)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ws.Read(context.Background()); err != nil {
			t.Fatal(err)
		}
		if <-held {
			t.Errorf("after echoing a %d-byte message the connection still held a buffer", n)
		}
	}
}
