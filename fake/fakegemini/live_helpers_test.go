package fakegemini

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/genai"
)

const liveModel = "gemini-live-test"

// liveWait bounds every wait of the Live tests; a stuck test fails instead
// of hanging.
const liveWait = 5 * time.Second

// startLive runs a fake server whose Live brain is brain and returns it with
// the ws:// base URL for the genai Live client.
func startLive(t *testing.T, brain LiveBrain) (*Server, string) {
	t.Helper()
	s, base := startServer(t, NewScript())
	if brain != nil {
		s.SetLiveBrain(brain)
	}
	return s, wsBase(base)
}

// wsBase is the ws:// base URL the genai Live client needs for a fake
// served at the http:// base: the SDK turns http into wss (TLS).
func wsBase(httpBase string) string { return "ws" + strings.TrimPrefix(httpBase, "http") }

// liveClient is a real genai Live session with one goroutine calling
// Receive, as a gateway would.
type liveClient struct {
	sess *genai.Session
	msgs chan received
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

type received struct {
	msg *genai.LiveServerMessage
	err error
}

// connectLive opens a genai Live session to base; the test ends it.
func connectLive(t *testing.T, base string, cfg *genai.LiveConnectConfig) *liveClient {
	t.Helper()
	c, err := tryConnectLive(t, base, cfg)
	if err != nil {
		t.Fatalf("live connect: %v", err)
	}
	return c
}

// tryConnectLive is connectLive for tests that expect Connect to fail.
func tryConnectLive(t *testing.T, base string, cfg *genai.LiveConnectConfig) (*liveClient, error) {
	t.Helper()
	client := newClient(t, base)
	type result struct {
		sess *genai.Session
		err  error
	}
	ch := make(chan result, 1)
	go func() { // Connect has no timeout of its own
		sess, err := client.Live.Connect(context.Background(), liveModel, cfg)
		ch <- result{sess, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-time.After(liveWait):
		t.Fatal("live connect did not return")
	}
	if r.err != nil {
		return nil, r.err
	}
	c := &liveClient{sess: r.sess, msgs: make(chan received, 256), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			msg, err := c.sess.Receive()
			select {
			case c.msgs <- received{msg, err}:
			case <-c.stop:
				return
			}
			if err != nil {
				return // errors are final in the SDK
			}
		}
	}()
	t.Cleanup(c.close)
	return c, nil
}

// close hangs up like the SDK does (no close frame) and waits for the
// receiving goroutine.
func (c *liveClient) close() {
	c.once.Do(func() {
		close(c.stop)
		_ = c.sess.Close()
		<-c.done
	})
}

// next returns the next server message, failing the test on an error.
func (c *liveClient) next(t *testing.T) *genai.LiveServerMessage {
	t.Helper()
	r := c.recv(t)
	if r.err != nil {
		t.Fatalf("receive: %v", r.err)
	}
	return r.msg
}

func (c *liveClient) recv(t *testing.T) received {
	t.Helper()
	select {
	case r := <-c.msgs:
		return r
	case <-time.After(liveWait):
		t.Fatal("no server message")
		return received{}
	}
}

// skipSetupComplete consumes the setupComplete the SDK's first Receive
// echoes.
func (c *liveClient) skipSetupComplete(t *testing.T) {
	t.Helper()
	if m := c.next(t); m.SetupComplete == nil {
		t.Fatalf("first Receive = %+v, want the echoed setupComplete", m)
	}
}

// closeError waits for the connection to end and returns its close frame.
func (c *liveClient) closeError(t *testing.T) *websocket.CloseError {
	t.Helper()
	for {
		r := c.recv(t)
		if r.err != nil {
			return asCloseError(t, r.err)
		}
	}
}

func asCloseError(t *testing.T, err error) *websocket.CloseError {
	t.Helper()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a *websocket.CloseError", err, err)
	}
	return ce
}

// until collects server messages up to and including the first one for
// which stop is true.
func (c *liveClient) until(t *testing.T, stop func(*genai.LiveServerMessage) bool) []*genai.LiveServerMessage {
	t.Helper()
	var out []*genai.LiveServerMessage
	for {
		m := c.next(t)
		out = append(out, m)
		if stop(m) {
			return out
		}
	}
}

func isTurnComplete(m *genai.LiveServerMessage) bool {
	return m.ServerContent != nil && m.ServerContent.TurnComplete
}

func isToolCall(m *genai.LiveServerMessage) bool { return m.ToolCall != nil }

// takeSession waits for the next connection a LiveScript receives.
func takeSession(t *testing.T, b *LiveScript) *LiveSession {
	t.Helper()
	select {
	case s := <-b.Sessions():
		return s
	case <-time.After(liveWait):
		t.Fatal("no live session reached the brain")
		return nil
	}
}

// nextEvent waits for the next client message the brain receives.
func nextEvent(t *testing.T, s *LiveSession) ClientEvent {
	t.Helper()
	select {
	case ev, ok := <-s.Events():
		if !ok {
			t.Fatal("events closed")
		}
		return ev
	case <-time.After(liveWait):
		t.Fatal("no client event reached the brain")
		return ClientEvent{}
	}
}

// rawDial opens a WebSocket to the Live endpoint without the SDK, for what
// the SDK cannot send (no key, a bad model, a bad message).
func rawDial(t *testing.T, base, query string, header map[string]string) *websocket.Conn {
	t.Helper()
	return dialURL(t, strings.TrimSuffix(base, "/")+"/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"+query, header)
}

// dialURL opens a WebSocket to u without the SDK.
func dialURL(t *testing.T, u string, header map[string]string) *websocket.Conn {
	t.Helper()
	h := make(map[string][]string)
	for k, v := range header {
		h[k] = []string{v}
	}
	conn, resp, err := websocket.DefaultDialer.Dial(u, h)
	if err != nil {
		t.Fatalf("dial %s: %v", u, err)
	}
	_ = resp.Body.Close()
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetReadDeadline(time.Now().Add(liveWait))
	return conn
}

// rawCloseError reads until the server's close frame.
func rawCloseError(t *testing.T, conn *websocket.Conn) *websocket.CloseError {
	t.Helper()
	for {
		if _, _, err := conn.ReadMessage(); err != nil {
			return asCloseError(t, err)
		}
	}
}

// speech synthesizes a loud 220 Hz sine as 16 kHz PCM16LE, standing in
// for a user's voice.
func speech(d time.Duration) []byte {
	n := int(16000 * d / time.Second)
	pcm := make([]byte, 0, 2*n)
	for i := range n {
		v := 8000 * math.Sin(2*math.Pi*220*float64(i)/16000)
		pcm = binary.LittleEndian.AppendUint16(pcm, uint16(int16(v)))
	}
	return pcm
}

// silence is d of 16 kHz PCM16LE silence.
func silence(d time.Duration) []byte { return make([]byte, 2*int(16000*d/time.Second)) }

// sendAudio streams pcm to the session in 100 ms chunks.
func sendAudio(t *testing.T, c *liveClient, pcm []byte) {
	t.Helper()
	const chunk = 3200
	for len(pcm) > 0 {
		n := min(chunk, len(pcm))
		err := c.sess.SendRealtimeInput(genai.LiveRealtimeInput{Audio: &genai.Blob{MIMEType: "audio/pcm;rate=16000", Data: pcm[:n]}})
		if err != nil {
			t.Fatalf("send audio: %v", err)
		}
		pcm = pcm[n:]
	}
}
