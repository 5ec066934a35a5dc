package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// Helpers of the voice tests: a browser that hears audio, a recorder of
// what the fake Live model received, and a Redis proxy that can stall.

// frame is one message the gateway sent the browser: a JSON event, or
// (ev nil) a binary frame of model audio.
type frame struct {
	ev    event
	audio []byte
}

// recv reads one frame, failing the test after 10 s.
func (c *wsClient) recv() frame {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	typ, b, err := c.c.Read(ctx)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	if typ == websocket.MessageBinary {
		return frame{audio: b}
	}
	var ev event
	if err := json.Unmarshal(b, &ev); err != nil {
		c.t.Fatalf("gateway sent invalid JSON %q: %v", b, err)
	}
	return frame{ev: ev}
}

// recvUntil reads frames, audio included, up to and including the first
// event of type typ.
func (c *wsClient) recvUntil(typ string) []frame {
	c.t.Helper()
	var out []frame
	for {
		f := c.recv()
		out = append(out, f)
		if f.ev != nil && f.ev.typ() == typ {
			return out
		}
	}
}

// recvAudio reads frames until n bytes of audio have arrived; the events
// read meanwhile are returned too.
func (c *wsClient) recvAudio(n int) ([]byte, []event) {
	c.t.Helper()
	var audio []byte
	var evs []event
	for len(audio) < n {
		f := c.recv()
		if f.ev != nil {
			evs = append(evs, f.ev)
			continue
		}
		audio = append(audio, f.audio...)
	}
	return audio, evs
}

// sendAudio sends one binary frame of microphone audio.
func (c *wsClient) sendAudio(pcm []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.c.Write(ctx, websocket.MessageBinary, pcm)
}

func events(fs []frame) []event {
	var out []event
	for _, f := range fs {
		if f.ev != nil {
			out = append(out, f.ev)
		}
	}
	return out
}

func audioOf(fs []frame) []byte {
	var out []byte
	for _, f := range fs {
		out = append(out, f.audio...)
	}
	return out
}

// pcm returns n bytes of recognisable audio: a counter from seed, so that a
// lost, repeated or reordered chunk changes the concatenation.
func pcm(seed, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(seed + i*7 + i/251)
	}
	return b
}

// upstream is one connection to the fake Live model, with everything the
// gateway sent on it recorded. A goroutine drains its events (the fake
// stalls a connection whose events are not read) until it ends.
type upstream struct {
	*fakegemini.LiveSession
	mu     sync.Mutex
	evs    []fakegemini.ClientEvent
	ended  chan struct{}
	t      testing.TB
	script *fakegemini.LiveScript
}

// nextUpstream waits for the gateway's next connection to the fake.
func nextUpstream(t testing.TB, script *fakegemini.LiveScript) *upstream {
	t.Helper()
	select {
	case s := <-script.Sessions():
		u := &upstream{LiveSession: s, ended: make(chan struct{}), t: t, script: script}
		go u.drain()
		return u
	case <-time.After(10 * time.Second):
		t.Fatal("the gateway opened no upstream Live session")
		return nil
	}
}

// noUpstream checks that no further upstream connection was opened.
func noUpstream(t testing.TB, script *fakegemini.LiveScript) {
	t.Helper()
	select {
	case s := <-script.Sessions():
		t.Fatalf("unexpected upstream connection %s", s.ID)
	default:
	}
}

func (u *upstream) drain() {
	defer close(u.ended)
	for ev := range u.Events() {
		u.mu.Lock()
		u.evs = append(u.evs, ev)
		u.mu.Unlock()
	}
}

func (u *upstream) received() []fakegemini.ClientEvent {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]fakegemini.ClientEvent(nil), u.evs...)
}

func (u *upstream) ofKind(k fakegemini.EventKind) []fakegemini.ClientEvent {
	var out []fakegemini.ClientEvent
	for _, ev := range u.received() {
		if ev.Kind == k {
			out = append(out, ev)
		}
	}
	return out
}

// audio is the microphone audio this upstream received, concatenated.
func (u *upstream) audio() []byte {
	var out []byte
	for _, ev := range u.ofKind(fakegemini.EventAudio) {
		out = append(out, ev.Data...)
	}
	return out
}

// responses are the function responses this upstream received, in order.
func (u *upstream) responses() []*genai.FunctionResponse {
	var out []*genai.FunctionResponse
	for _, ev := range u.ofKind(fakegemini.EventToolResponse) {
		out = append(out, ev.FunctionResponses...)
	}
	return out
}

// waitResponses waits until n function responses have arrived.
func (u *upstream) waitResponses(n int) []*genai.FunctionResponse {
	u.t.Helper()
	testwait.For(u.t, "function responses upstream", func() bool { return len(u.responses()) >= n })
	return u.responses()
}

// waitEnded waits until the gateway hung up this upstream.
func (u *upstream) waitEnded() {
	u.t.Helper()
	select {
	case <-u.ended:
	case <-time.After(10 * time.Second):
		u.t.Fatalf("the gateway did not hang up upstream %s", u.ID)
	}
}

// must fails the test when an emitter failed.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("fake live: %v", err)
	}
}

// startVoiceGateway starts a gateway whose fake Live model is a script run
// by the test, and whose text model is text (nil: an empty script).
func startVoiceGateway(t testing.TB, cfg gateway.Config, text fakegemini.Brain) (*testGateway, *fakegemini.LiveScript) {
	t.Helper()
	script := fakegemini.NewLiveScript()
	if text == nil {
		text = fakegemini.NewScript()
	}
	return startGatewayWith(t, cfg, brains{text: text, live: script}), script
}

// startInVoice opens a session in voice mode and returns its ready event
// and its upstream.
func startInVoice(t testing.TB, g *testGateway, script *fakegemini.LiveScript) (*wsClient, event, *upstream) {
	t.Helper()
	c := g.dial("", nil)
	ready, u := startVoiceOn(t, c, script)
	return c, ready, u
}

// startVoiceOn opens a session in voice mode on c and returns its ready
// event and its upstream.
func startVoiceOn(t testing.TB, c *wsClient, script *fakegemini.LiveScript) (event, *upstream) {
	t.Helper()
	ready := c.start(map[string]any{"mode": "voice"})
	if ev := c.next(); ev.typ() != "mode" || ev.str("mode") != "voice" || ev.str("reason") != "session.start" {
		t.Fatalf("after session.start voice: %v, want mode voice", ev)
	}
	return ready, nextUpstream(t, script)
}

// userTexts are the texts of the user turns of a clientContent event.
func contentTexts(ev fakegemini.ClientEvent) []string {
	var out []string
	for _, c := range ev.Turns {
		for _, p := range c.Parts {
			if p.Text != "" {
				out = append(out, c.Role+":"+p.Text)
			}
		}
	}
	return out
}

// stallProxy is a TCP proxy in front of Redis whose client-to-server
// direction can be held: commands sent while it is paused reach Redis only
// after Resume, so the gateway's Redis calls block meanwhile.
type stallProxy struct {
	ln      net.Listener
	backend string

	mu     sync.Mutex
	cond   *sync.Cond
	paused bool
	closed bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startStallProxy(t testing.TB, backend string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, backend: backend}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *stallProxy) addr() string { return p.ln.Addr().String() }

func (p *stallProxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.backend)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = in.Close()
			_ = out.Close()
			return
		}
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			p.forward(out, in)
			_ = out.Close()
			_ = in.Close()
		}()
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(in, out)
			_ = in.Close()
			_ = out.Close()
		}()
	}
}

// forward copies client bytes to Redis, holding them while paused.
func (p *stallProxy) forward(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.paused && !p.closed {
				p.cond.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *stallProxy) pause() {
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
}

func (p *stallProxy) resume() {
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
	p.cond.Broadcast()
}

func (p *stallProxy) close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.mu.Unlock()
	p.cond.Broadcast()
	_ = p.ln.Close()
	for _, c := range conns {
		_ = c.Close()
	}
	p.wg.Wait()
}
