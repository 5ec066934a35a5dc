//go:build linux && !386

package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// readCoroutines waits until n goroutines are a WebSocket reader's
// coroutine (internal/wsbuf's stay_linux.go: a reader staying inside one
// raw read, one read system call a message).
func readCoroutines(t *testing.T, n int) {
	t.Helper()
	testwait.ForNil(t, fmt.Sprint(n, " read coroutines"), func() error {
		k := 0
		for _, g := range testwait.Stacks() {
			if strings.Contains(g, "wsbuf.(*sockReader).reads(") {
				k++
			}
		}
		if k != n {
			return fmt.Errorf("%d read coroutines", k)
		}
		return nil
	})
}

// While its session is in voice and the microphone streams, the browser's
// reader reads a message in one read system call: it stays inside one raw
// read, in a coroutine, as the upstream's reader does (two coroutines).
// When the session goes back to text both end — the upstream's with its
// connection, the browser's though the browser only waits for its next
// message — and the text session's reader is one goroutine again, which
// reads on (it answers a ping).
func TestBrowserReaderStaysInsideOnlyWhileTheSessionIsInVoice(t *testing.T) {
	r := startRelayTo(t, echoTurns) // voice.stop between turns: at once
	r.chunk()
	readCoroutines(t, 2)
	ctx := context.Background()
	if err := r.c.Write(ctx, websocket.MessageText, []byte(`{"type":"voice.stop"}`)); err != nil {
		t.Fatal(err)
	}
	for {
		typ, data, err := r.c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ev struct{ Type, Mode string }
		if typ == websocket.MessageText && json.Unmarshal(data, &ev) == nil && ev.Type == "mode" && ev.Mode == "text" {
			break
		}
	}
	readCoroutines(t, 0)
	// The reader reads on: it answers the browser's ping (read by a
	// reader of the browser's side).
	pinged := make(chan error, 1)
	go func() { pinged <- r.c.Ping(ctx) }()
	go func() { _, _, _ = r.c.Read(ctx) }()
	if err := <-pinged; err != nil {
		t.Fatal(err)
	}
}
