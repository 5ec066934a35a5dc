package web

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// This test runs the page's voice protocol state (voicelink.js) with a real
// Connection under Node against a WebSocket server playing the gateway, and
// a fake microphone feeding a 1 kHz tone through the worklet's conversion.

type frame struct {
	binary bool
	data   []byte
}

// voiceGateway plays one voice conversation and records what the page
// sent, in order; fail collects protocol violations.
type voiceGateway struct {
	mu        sync.Mutex
	fail      []string
	beforeVox []string // messages between session.start and our `mode voice`
	audio     []byte   // microphone audio received while in voice
	sizes     []int    // binary frame sizes
	afterEnd  []string // anything the page sent after `mode text`
	spoken    int      // bytes of speech sent to the page
}

func (g *voiceGateway) failf(format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.fail = append(g.fail, fmt.Sprintf(format, args...))
}

func (g *voiceGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"turnstile.v1"}})
	if err != nil {
		return
	}
	defer c.CloseNow()
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()

	frames := make(chan frame, 1024)
	var reader sync.WaitGroup
	reader.Add(1)
	go func() {
		defer reader.Done()
		defer close(frames)
		for {
			typ, data, err := c.Read(ctx)
			if err != nil {
				return
			}
			frames <- frame{typ == websocket.MessageBinary, data}
		}
	}()
	defer func() {
		g.mu.Lock()
		failed := len(g.fail) > 0
		g.mu.Unlock()
		if failed {
			_ = c.Close(4002, "test gateway: protocol violation") // the page stops at once
		}
		_ = c.CloseNow() // ends the reader's Read
		reader.Wait()
	}()
	next := func(wait time.Duration) (frame, bool) {
		select {
		case f, ok := <-frames:
			return f, ok
		case <-time.After(wait):
			return frame{}, false
		}
	}
	msgType := func(f frame) string {
		var m struct{ Type string }
		_ = json.Unmarshal(f.data, &m)
		return m.Type
	}
	write := func(v string) { _ = c.Write(ctx, websocket.MessageText, []byte(v)) }

	if f, ok := next(5 * time.Second); !ok || msgType(f) != "session.start" {
		g.failf("first frame %q, want session.start", f.data)
		return
	}
	write(`{"type":"session.ready","sessionId":"s1","resumeToken":"t1","mode":"text","resumed":false,"turn":0,"model":{"name":"m","offline":true}}`)

	// Text mode: the page must ask for voice before sending any audio. Let
	// it capture for a while before answering.
	f, ok := next(5 * time.Second)
	g.mu.Lock()
	g.beforeVox = append(g.beforeVox, describe(f, msgType))
	g.mu.Unlock()
	if !ok || f.binary || msgType(f) != "voice.start" {
		g.failf("in text mode the page sent %s, want voice.start", describe(f, msgType))
		return
	}
	if f, ok := next(300 * time.Millisecond); ok {
		g.failf("before the switch the page sent %s", describe(f, msgType))
		return
	}
	write(`{"type":"mode","mode":"voice","reason":"client"}`)

	// Voice: one second of microphone audio.
	for len(g.audio) < 32000 {
		f, ok := next(3 * time.Second)
		if !ok || !f.binary {
			g.failf("in voice the page sent %s, want audio", describe(f, msgType))
			return
		}
		g.mu.Lock()
		g.audio = append(g.audio, f.data...)
		g.sizes = append(g.sizes, len(f.data))
		g.mu.Unlock()
	}

	// The model speaks (200 ms at 24 kHz), with transcripts; then the user
	// barges in.
	speech := make([]byte, 9600)
	for i := 0; i < len(speech)/2; i++ {
		binary.LittleEndian.PutUint16(speech[2*i:], uint16(int16(8000*math.Sin(2*math.Pi*440*float64(i)/24000))))
	}
	_ = c.Write(ctx, websocket.MessageBinary, speech[:4800])
	write(`{"type":"turn.start","turn":1,"text":""}`)
	write(`{"type":"transcript.output","turn":1,"text":"Hello"}`)
	_ = c.Write(ctx, websocket.MessageBinary, speech[4800:])
	write(`{"type":"transcript.input","turn":1,"text":"Hi"}`)
	g.mu.Lock()
	g.spoken = len(speech)
	g.mu.Unlock()
	write(`{"type":"audio.interrupted","turn":1}`)

	// The page mutes its microphone on the interruption: audio (frames in
	// flight, then the last partial one) and then audio.end.
	for {
		f, ok := next(3 * time.Second)
		if !ok {
			g.failf("no audio.end after the microphone stopped")
			return
		}
		if !f.binary {
			if msgType(f) != "audio.end" {
				g.failf("after the interruption the page sent %s, want audio then audio.end", describe(f, msgType))
			}
			break
		}
		g.mu.Lock()
		g.audio = append(g.audio, f.data...)
		g.sizes = append(g.sizes, len(f.data))
		g.mu.Unlock()
	}

	// Back to text: nothing more may come.
	write(`{"type":"mode","mode":"text","reason":"end_voice_session"}`)
	for {
		f, ok := next(300 * time.Millisecond)
		if !ok {
			break
		}
		g.mu.Lock()
		g.afterEnd = append(g.afterEnd, describe(f, msgType))
		g.mu.Unlock()
	}
	_ = c.Close(4005, "resumed elsewhere")
}

func describe(f frame, msgType func(frame) string) string {
	if f.binary {
		return fmt.Sprintf("binary(%d)", len(f.data))
	}
	if f.data == nil {
		return "nothing"
	}
	return msgType(f)
}

func TestVoiceSessionSendsMicrophoneAudioOnlyInVoiceMode(t *testing.T) {
	gw := &voiceGateway{}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/ws"

	var events []map[string]any
	sc := bufio.NewScanner(strings.NewReader(runNode(t, "voice", url)))
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("harness line %q: %v", sc.Text(), err)
		}
		events = append(events, ev)
	}
	find := func(event string) map[string]any {
		for _, ev := range events {
			if ev["event"] == event {
				return ev
			}
		}
		t.Fatalf("the harness never reported %q: %v", event, events)
		return nil
	}

	gw.mu.Lock()
	defer gw.mu.Unlock()
	for _, f := range gw.fail {
		t.Error(f)
	}

	if ev := find("micStarted"); ev["ok"] != true || ev["mic"] != "waiting" || ev["switching"] != "voice" {
		t.Errorf("starting the mic in a text session: %v, want waiting for the switch to voice", ev)
	}
	// While waiting, frames were kept and went out first once in voice:
	// the first word is not lost.
	if ev := find("mode"); ev["mic"] != "on" || ev["framesSent"].(float64) < 3 {
		t.Errorf("on `mode voice`: %v, want the mic on and the frames captured meanwhile sent", ev)
	}
	for i, n := range gw.sizes[:len(gw.sizes)-1] {
		if n != 1280 {
			t.Errorf("frame %d has %d bytes, want 1280 (40 ms)", i, n)
		}
	}
	if last := gw.sizes[len(gw.sizes)-1]; last == 0 || last > 1280 || last%2 != 0 {
		t.Errorf("the last (partial) frame has %d bytes", last)
	}
	// The audio is the microphone's tone, at 16 kHz: 1 kHz at half scale.
	pcm := make([]float64, len(gw.audio)/2)
	for i := range pcm {
		pcm[i] = float64(int16(binary.LittleEndian.Uint16(gw.audio[2*i:]))) / 32768
	}
	if got := tone(pcm[160:160+8000], 1000, 16000); math.Abs(got-0.5) > 0.01 {
		t.Errorf("1 kHz amplitude in the received audio %.4f, want 0.5: not 16 kHz PCM16 LE of the tone", got)
	}
	if got := zeroCrossings(pcm[160 : 160+8000]); got < 998 || got > 1002 {
		t.Errorf("%d zero crossings in 0.5 s of received audio, want 1000", got)
	}

	stopped := find("micStopped")
	if stopped["mic"] != "off" || stopped["audioEnds"] != float64(1) || stopped["bytesSent"] != float64(len(gw.audio)) {
		t.Errorf("after the interruption: %v; want mic off, one audio.end, %d bytes sent", stopped, len(gw.audio))
	}
	for _, ev := range events {
		if ev["event"] == "message" && ev["type"] == "audio.interrupted" && ev["audioBytes"] != float64(gw.spoken) {
			t.Errorf("the page had %v bytes of speech when audio.interrupted came, want all %d, in order", ev["audioBytes"], gw.spoken)
		}
	}
	if ev := find("afterText"); ev["framesSent"] != stopped["framesSent"] {
		t.Errorf("a frame captured after `mode text` was sent: %v", ev)
	}
	if len(gw.afterEnd) != 0 {
		t.Errorf("after `mode text` the page sent %v", gw.afterEnd)
	}
	if ev := find("stopped"); ev["code"] != float64(4005) {
		t.Errorf("the run ended with %v", ev)
	}
}
