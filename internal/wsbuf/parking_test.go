package wsbuf

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// burstServer sends msgs once told to (go), all before the client reads
// any, then one more message each time it reads one from the client.
func burstServer(t *testing.T, msgs [][]byte, start <-chan struct{}, sent chan<- struct{}) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer func() { _ = ws.CloseNow() }()
		<-start
		for _, m := range msgs {
			if ws.Write(context.Background(), websocket.MessageBinary, m) != nil {
				return
			}
		}
		sent <- struct{}{}
		for {
			_, m, err := ws.Read(context.Background())
			if err != nil || ws.Write(context.Background(), websocket.MessageBinary, m) != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// readAll reads n messages as a parked reader does (Wait, then Reader to
// the message's end) and sends what it read, or its error, on got.
func readAll(ws *websocket.Conn, pk *Parking, n int, got chan<- []byte, fail chan<- error) {
	buf := make([]byte, 1<<16)
	for range n {
		pk.Wait()
		_, r, err := ws.Reader(context.Background())
		if err != nil {
			fail <- err
			return
		}
		m := 0
		for {
			k, err := r.Read(buf[m:])
			m += k
			if err != nil {
				break
			}
		}
		got <- bytes.Clone(buf[:m])
	}
}

// Messages that arrived together — tiny frames a few to a read, a frame
// header split from its payload, a 64 KiB one — are all read without
// waiting for anything more to arrive: a parked reader never waits while
// a frame it was handed sits unread.
func TestParkedReaderReadsEveryMessageThatArrivedTogether(t *testing.T) {
	var mixed [][]byte
	for n := range 40 {
		mixed = append(mixed, bytes.Repeat([]byte{byte(n)}, n%18))
	}
	mixed = append(mixed, make([]byte, 125), make([]byte, 126), make([]byte, 5000), make([]byte, 65536), []byte("last"))
	for name, msgs := range map[string][][]byte{
		"three frames within the library's 16 bytes": {[]byte("a"), []byte("bc"), {}},
		"mixed sizes": mixed,
	} {
		t.Run(name, func(t *testing.T) { readBurst(t, msgs) })
	}
}

func readBurst(t *testing.T, msgs [][]byte) {
	start, sent := make(chan struct{}), make(chan struct{}, 1)
	ws, pk := leanDial(t, burstServer(t, msgs, start, sent), newRecTransport(), nil)
	if pk.body == nil || pk.lean == nil {
		t.Skip("no parking here (no raw socket)")
	}
	close(start)
	<-sent // everything is on its way before the first read
	got, fail := make(chan []byte, len(msgs)), make(chan error, 1)
	go readAll(ws, pk, len(msgs), got, fail)
	for i, want := range msgs {
		if err := testwait.Poll(func() error {
			if len(got) > 0 || len(fail) > 0 {
				return nil
			}
			return errors.New("the reader has not read the next message")
		}); err != nil {
			t.Fatalf("stalled before message %d of %d, with every message already sent", i, len(msgs))
		}
		select {
		case m := <-got:
			if !bytes.Equal(m, want) {
				t.Fatalf("message %d: %d bytes, want %d", i, len(m), len(want))
			}
		case err := <-fail:
			t.Fatalf("message %d: %v", i, err)
		}
	}
}

// A reader waiting for its next message waits in Parking.Wait, outside
// coder/websocket's frame-header read, and gets the message once it comes.
func TestParkedReaderWaitsOutsideTheLibrary(t *testing.T) {
	start, sent := make(chan struct{}), make(chan struct{}, 1)
	ws, pk := leanDial(t, burstServer(t, nil, start, sent), newRecTransport(), nil)
	if pk.body == nil || pk.lean == nil {
		t.Skip("no parking here (no raw socket)")
	}
	close(start)
	<-sent
	got, fail := make(chan []byte, 1), make(chan error, 1)
	go readAll(ws, pk, 1, got, fail)
	testwait.ForNil(t, "the reader to wait in Parking.Wait", func() error {
		st := stackWith("wsbuf.readAll")
		if !strings.Contains(st, "wsbuf.(*Parking).Wait") {
			return fmt.Errorf("its stack:\n%s", st)
		}
		if strings.Contains(st, "coder/websocket") {
			t.Fatalf("the reader waits inside the library:\n%s", st)
		}
		return nil
	})
	if err := ws.Write(context.Background(), websocket.MessageBinary, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if string(m) != "hello" {
			t.Fatalf("got %q", m)
		}
	case err := <-fail:
		t.Fatal(err)
	}
}

// stackWith is the stack of the first goroutine whose stack has fn in it,
// or "".
func stackWith(fn string) string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			return g
		}
	}
	return ""
}

// A frame that came in the same segment as the handshake's response (a
// server may speak first) is read without waiting for more: the HTTP
// transport's reader was handed the response and nothing past it.
func TestParkedReaderReadsAFrameThatCameWithTheHandshake(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer func() { _ = c.Close() }()
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		h := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		resp := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
			"Sec-WebSocket-Accept: " + base64.StdEncoding.EncodeToString(h[:]) + "\r\n\r\n"
		// The response and a text frame "hi" in one write; then wait for
		// the client to go.
		if _, err := c.Write(append([]byte(resp), 0x81, 2, 'h', 'i')); err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, c)
	}()
	url := "ws://" + ln.Addr().String()
	ctx, pk := WithParking(context.Background(), url)
	ws, _, err := websocket.Dial(ctx, url,
		&websocket.DialOptions{HTTPClient: &http.Client{Transport: &Transport{Base: newRecTransport()}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	if pk.body == nil || pk.lean == nil {
		t.Skip("no parking here (no raw socket)")
	}
	got, fail := make(chan []byte, 1), make(chan error, 1)
	go readAll(ws, pk, 1, got, fail)
	testwait.For(t, "the frame sent with the handshake", func() bool { return len(got) > 0 || len(fail) > 0 })
	select {
	case m := <-got:
		if string(m) != "hi" {
			t.Fatalf("got %q, want \"hi\"", m)
		}
	case err := <-fail:
		t.Fatal(err)
	}
}
