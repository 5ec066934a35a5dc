package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/turnstile-gw/turnstile/internal/wsbuf"
)

// liveEcho is a Live endpoint with the real wire shape: setup →
// setupComplete, then every realtimeInput audio chunk answered by a
// model-audio message carrying the chunk twice over, in two parts.
type liveEcho struct {
	t     *testing.T
	mu    sync.Mutex
	setup []byte
	wg    sync.WaitGroup
}

func (e *liveEcho) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.wg.Add(1)
	defer e.wg.Done()
	if !strings.HasSuffix(r.URL.Path, "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent") ||
		r.Header.Get("x-goog-api-key") != "k" {
		http.Error(w, "no", http.StatusNotFound)
		return
	}
	c, err := wsbuf.Accept(w, r, wsbuf.AcceptOptions{})
	if err != nil {
		return
	}
	defer c.CloseNow()
	read := func() ([]byte, bool) {
		if _, err := c.Next(); err != nil {
			return nil, false
		}
		msg, err := c.ReadBody(nil)
		return msg, err == nil
	}
	setup, ok := read()
	if !ok {
		return
	}
	e.mu.Lock()
	e.setup = setup
	e.mu.Unlock()
	if c.Write(false, []byte(`{"setupComplete":{}}`)) != nil {
		return
	}
	for {
		msg, ok := read()
		if !ok {
			return
		}
		var in struct {
			RealtimeInput struct {
				Audio struct{ Data, MimeType string }
			}
		}
		if err := json.Unmarshal(msg, &in); err != nil || in.RealtimeInput.Audio.MimeType != "audio/pcm;rate=16000" {
			e.t.Errorf("upstream got %s", msg)
			return
		}
		d := in.RealtimeInput.Audio.Data
		reply := `{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"mimeType":"audio/pcm;rate=24000","data":"` + d +
			`"}},{"inlineData":{"mimeType":"audio/pcm;rate=24000","data":"` + d + `"}}]}}}`
		if c.Write(false, []byte(reply)) != nil {
			return
		}
	}
}

// mode is how a relay under test runs its sessions.
type mode int

const (
	goroutines     mode = iota // a goroutine per socket
	loopMode                   // -loop
	coroMode                   // -coro
	coroParkedMode             // -coro-netpoll
	coroBothMode               // -coro-both
)

// modes runs f for the goroutine relay and, on Linux, the loops.
func modes(t *testing.T, f func(t *testing.T, m mode)) {
	t.Run("goroutines", func(t *testing.T) { f(t, goroutines) })
	if runtime.GOOS == "linux" {
		t.Run("loop", func(t *testing.T) { f(t, loopMode) })
		t.Run("coro", func(t *testing.T) { f(t, coroMode) })
		t.Run("coro-netpoll", func(t *testing.T) { f(t, coroParkedMode) })
		t.Run("coro-both", func(t *testing.T) { f(t, coroBothMode) })
	}
}

// newRelay is a relay to the Live endpoint at url, in mode m.
func newRelay(t *testing.T, url string, m mode) *relay {
	r := &relay{live: url, key: "k", model: "m1"}
	switch m {
	case loopMode:
		l, err := newLoop()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		r.loop = l
	case coroMode, coroParkedMode, coroBothMode:
		l, err := newCoroLoop(m == coroParkedMode, m == coroBothMode)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		r.coro = l
	}
	return r
}

func TestRelaysAudioBothWaysAfterTheSetUp(t *testing.T) { modes(t, relaysAudioBothWays) }

func relaysAudioBothWays(t *testing.T, m mode) {
	echo := &liveEcho{t: t}
	live := httptest.NewServer(echo)
	defer func() { live.Close(); echo.wg.Wait() }()
	url, err := liveURL(live.URL)
	if err != nil {
		t.Fatal(err)
	}
	r := newRelay(t, url, m)
	var served sync.WaitGroup
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		served.Add(1)
		defer served.Done()
		r.ServeHTTP(w, req)
	}))
	defer func() { front.Close(); served.Wait() }()

	c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(front.URL, "http")+"/v1/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"type":"session.start","mode":"voice"}`)); err != nil {
		t.Fatal(err)
	}
	_, msg, err := c.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	var ready struct{ Type, Mode, SessionID string }
	if err := json.Unmarshal(msg, &ready); err != nil || ready.Type != "session.ready" || ready.Mode != "voice" || ready.SessionID == "" {
		t.Fatalf("first message %s, want session.ready in voice", msg)
	}
	echo.mu.Lock()
	setup := string(echo.setup)
	echo.mu.Unlock()
	if !strings.Contains(setup, `"model":"models/m1"`) || !strings.Contains(setup, `"AUDIO"`) {
		t.Fatalf("set-up sent %s", setup)
	}

	for i := range 3 {
		chunk := bytes.Repeat([]byte{byte(i), 0xfb, 0xff}, 213) // 639 bytes: base64 with padding
		if err := c.WriteMessage(websocket.BinaryMessage, chunk); err != nil {
			t.Fatal(err)
		}
		for part := range 2 {
			kind, got, err := c.ReadMessage()
			if err != nil {
				t.Fatal(err)
			}
			if kind != websocket.BinaryMessage || !bytes.Equal(got, chunk) {
				t.Fatalf("chunk %d part %d: got %d bytes (kind %d), want the chunk back (%s…)", i, part, len(got), kind,
					base64.StdEncoding.EncodeToString(got[:min(8, len(got))]))
			}
		}
	}
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"type":"ping"}`)); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := c.ReadMessage(); err != nil || string(msg) != `{"type":"pong"}` {
		t.Fatalf("ping answered %s, %v", msg, err)
	}
}

func TestUpstreamEndClosesTheBrowser(t *testing.T) { modes(t, upstreamEndClosesTheBrowser) }

func upstreamEndClosesTheBrowser(t *testing.T, m mode) {
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := wsbuf.Accept(w, r, wsbuf.AcceptOptions{})
		if err != nil {
			return
		}
		if _, err := c.Next(); err == nil {
			_, _ = c.ReadBody(nil)
			_ = c.Write(false, []byte(`{"setupComplete":{}}`))
		}
		_ = c.Close(1000, "bye")
	}))
	defer live.Close()
	url, _ := liveURL(live.URL)
	front := httptest.NewServer(newRelay(t, url, m))
	defer front.Close()
	c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(front.URL, "http")+"/v1/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.WriteMessage(websocket.TextMessage, []byte(`{"type":"session.start"}`))
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a liveness bound, not a timing
	for {
		if _, _, err := c.ReadMessage(); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the browser's connection stayed open after the upstream's end")
			}
			return
		}
	}
}

func TestLiveURL(t *testing.T) {
	for base, want := range map[string]string{
		"http://h:1":   "ws://h:1/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent",
		"https://h/":   "wss://h/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent",
		"ws://h:2/api": "ws://h:2/api/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent",
	} {
		if got, err := liveURL(base); err != nil || got != want {
			t.Errorf("liveURL(%q) = %q, %v; want %q", base, got, err, want)
		}
	}
	for _, bad := range []string{"", "ftp://h", "h:1"} {
		if _, err := liveURL(bad); err == nil {
			t.Errorf("liveURL(%q) accepted", bad)
		}
	}
}
