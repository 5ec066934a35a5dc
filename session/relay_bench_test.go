package session_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/internal/evloop"
	"github.com/turnstile-gw/turnstile/internal/fdroom"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/internal/wsbuf"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/session"
	"github.com/turnstile-gw/turnstile/session/voice"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/transport/geminilive"
)

// The whole voice relay, per 20 ms chunk: a browser (a real WebSocket
// client) sends 640 bytes of microphone audio; the session reads it and
// sends it up through the Live adapter over a real loopback WebSocket; the
// upstream answers every chunk with 960 bytes of model audio, which comes
// back through the adapter, the voice pump, the send queue and the writer
// to the browser. Allocations count the whole process, both peers
// included: they read and write without allocating.

// echoUpstream completes the Live setup and answers every client message
// with one model-audio message.
func echoUpstream(w http.ResponseWriter, r *http.Request) { echoWith(w, r, "") }

// echoTurns is echoUpstream whose every answer completes its turn.
func echoTurns(w http.ResponseWriter, r *http.Request) { echoWith(w, r, `,"turnComplete":true`) }

// echoWith is echoUpstream with more in each answer's serverContent.
func echoWith(w http.ResponseWriter, r *http.Request, more string) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer func() { _ = c.CloseNow() }()
	if _, _, err := c.Read(r.Context()); err != nil { // setup
		return
	}
	if c.Write(r.Context(), websocket.MessageBinary, []byte(`{"setupComplete":{}}`)) != nil {
		return
	}
	answer := []byte(`{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"data":"` +
		base64.StdEncoding.EncodeToString(make([]byte, 960)) + `","mimeType":"audio/pcm;rate=24000"}}]}` + more + `}}`)
	buf := make([]byte, 64<<10)
	for {
		_, rd, err := c.Reader(context.Background())
		if err != nil {
			return
		}
		for {
			if _, err := rd.Read(buf); err != nil {
				break
			}
		}
		if c.Write(context.Background(), websocket.MessageBinary, answer) != nil {
			return
		}
	}
}

type fixedTools struct{ reg *tools.Registry }

func (f fixedTools) Current() *tools.Registry { return f.reg }

// relay is a voice session relaying through the gateway: chunk sends one
// microphone chunk and reads the model audio it brings back.
type relay struct {
	chunk func()
	m     *metrics.Metrics
	c     *websocket.Conn // the browser
}

// startRelay starts the gateway, an echoing upstream and a browser in
// voice, warmed up by one exchange; everything stops in tb's cleanup.
func startRelay(tb testing.TB) relay { return startRelayTo(tb, echoUpstream) }

// startRelayTo is startRelay with the upstream upstream.
func startRelayTo(tb testing.TB, upstream http.HandlerFunc) relay {
	return startRelayOn(tb, upstream, nil)
}

// startRelayOn is startRelayTo with voice sessions on loops (nil: none).
func startRelayOn(tb testing.TB, upstream http.HandlerFunc, loops *evloop.Pool) relay {
	for _, v := range []string{"GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_API_KEY", "GEMINI_API_KEY"} {
		tb.Setenv(v, "")
	}
	up := httptest.NewServer(upstream)
	tb.Cleanup(up.Close)
	client, err := genai.NewClient(context.Background(), &genai.ClientConfig{Backend: genai.BackendGeminiAPI,
		APIKey: "k", HTTPOptions: genai.HTTPOptions{BaseURL: "ws://" + strings.TrimPrefix(up.URL, "http://") + "/"}})
	if err != nil {
		tb.Fatal(err)
	}
	mr := miniredis.RunT(tb)
	rdb, err := store.NewRedisClient("redis://"+mr.Addr(), time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = rdb.Close() })
	reg, err := tools.Combine()
	if err != nil {
		tb.Fatal(err)
	}
	m := metrics.New(prometheus.NewRegistry(), metrics.Build{Version: "bench"})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st := store.NewRedisStore(rdb, store.RedisStoreOptions{})
	// As the gateway assembles it: the upstream holds a descriptor of the
	// node's room (internal/fdroom), its sends through that wrapper.
	live := fdroom.Live(fdroom.New(1000), geminilive.New(client, "m", geminilive.Options{Loops: loops}))
	mgr := session.NewManager(session.Config{}, session.Deps{Store: st, Live: live, Loops: loops,
		Orchestrator: orchestrator.NewWith(orchestrator.Config{}, orchestrator.Deps{Registry: reg, Metrics: m, Log: log,
			Ledger: st, Confirms: st}),
		Tools: fixedTools{reg}, Metrics: m, Log: log})
	var wg sync.WaitGroup
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Accepted as the edge accepts browsers: buffers held only while
		// a frame is in flight.
		ws, err := wsbuf.Accept(w, r, wsbuf.AcceptOptions{Subprotocols: []string{protocol.Subprotocol}})
		if err != nil {
			return
		}
		wg.Add(1)
		defer wg.Done()
		mgr.Serve(context.WithoutCancel(r.Context()), ws, session.Identity{User: "u"})
	}))
	tb.Cleanup(gw.Close)

	ctx := context.Background()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(gw.URL, "http")+"/v1/ws",
		&websocket.DialOptions{Subprotocols: []string{protocol.Subprotocol}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = c.Close(websocket.StatusNormalClosure, "")
		ctxD, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		mgr.Drain(ctxD)
		wg.Wait()
		_ = c.CloseNow()
	})
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"session.start","mode":"voice"}`)); err != nil {
		tb.Fatal(err)
	}
	// session.ready, then mode voice.
	for n := 0; n < 2; {
		typ, _, err := c.Read(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		if typ == websocket.MessageText {
			n++
		}
	}
	mic := make([]byte, 640)
	buf := make([]byte, 64<<10)
	read := func() {
		for {
			typ, rd, err := c.Reader(context.Background())
			if err != nil {
				tb.Fatal(err)
			}
			n := 0
			for {
				k, err := rd.Read(buf[n:])
				n += k
				if err != nil {
					break
				}
			}
			if typ == websocket.MessageBinary {
				if n != 960 {
					tb.Fatalf("model audio frame of %d bytes, want 960", n)
				}
				return
			}
		}
	}
	chunk := func() {
		if err := c.Write(context.Background(), websocket.MessageBinary, mic); err != nil {
			tb.Fatal(err)
		}
		read()
	}
	// The first chunk opens the voice turn (turn.start): warm up.
	chunk()
	return relay{chunk: chunk, m: m, c: c}
}

// BenchmarkVoiceRelayChunk is one 20 ms chunk through the whole relay,
// with turnstile_relay_added_seconds sampling it (always on).
func BenchmarkVoiceRelayChunk(b *testing.B) { benchRelay(b, startRelay(b)) }

// BenchmarkVoiceRelayChunkOnALoop is BenchmarkVoiceRelayChunk with the
// session's sockets on an event loop (TURNSTILE_VOICE_LOOP).
func BenchmarkVoiceRelayChunkOnALoop(b *testing.B) {
	benchRelay(b, startRelayOn(b, echoUpstream, testLoops(b)))
}

// benchRelay relays chunks through r.
func benchRelay(b *testing.B, r relay) {
	b.SetBytes(640)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r.chunk()
	}
	b.StopTimer()
}

// testLoops is a pool of one event loop, closed at the test's end; the
// test is skipped where there are none.
func testLoops(tb testing.TB) *evloop.Pool {
	p, err := evloop.NewPool(1)
	if err != nil {
		tb.Skip(err)
	}
	tb.Cleanup(p.Close)
	return p
}

// On an event loop too, a relayed chunk allocates nothing, either way.
func TestVoiceRelayOnALoopDoesNotAllocate(t *testing.T) {
	r := startRelayOn(t, echoUpstream, testLoops(t))
	for range 20 {
		r.chunk() // the browser's socket joins the loop at its first microphone frame
	}
	if a := testing.AllocsPerRun(400, r.chunk); a != 0 && !raceEnabled {
		t.Fatalf("%v allocations per relayed chunk on a loop", a)
	}
	if n := testutil.ToFloat64(r.m.AudioOut.WithLabelValues(session.ChannelBrowser.String(), "loop")); n < 400 {
		t.Fatalf("%v model-audio frames written on the loop, want the 400 relayed there at least", n)
	}
}

// The relay allocates nothing per chunk with its own timing on: the
// sampled frames (one in voice.RelaySampleEvery each way) are timed, and
// no frame, sampled or not, allocates.
func TestVoiceRelayTimesSampledChunksWithoutAllocating(t *testing.T) {
	r := startRelay(t)
	if a := testing.AllocsPerRun(400, r.chunk); a != 0 && !raceEnabled {
		t.Fatalf("%v allocations per relayed chunk", a)
	}
	for _, dir := range []string{"in", "out"} {
		n := histogramCount(t, r.m.RelayAdded.WithLabelValues(session.ChannelBrowser.String(), dir))
		// 401 chunks each way (and the warm-up): one in eight is timed.
		if want := uint64(401 / voice.RelaySampleEvery); n < want-1 || n > want+1 {
			t.Errorf("turnstile_relay_added_seconds{direction=%q} has %d samples after 401 chunks, want about %d", dir, n, want)
		}
	}
}

// histogramCount is how many samples one histogram series holds.
func histogramCount(t *testing.T, o prometheus.Observer) uint64 {
	t.Helper()
	var d dto.Metric
	if err := o.(prometheus.Metric).Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetHistogram().GetSampleCount()
}

// An active voice session between two chunks holds two goroutines parked
// in a socket read: the browser's reader (here the test server's handler
// goroutine, which Serve runs on) and the upstream's pump — on Linux each
// waits on the coroutine that reads its socket inside one raw read
// (internal/wsbuf's stay_linux.go), parked in that read. The writer runs
// only while a frame is being written: its stack is not kept between
// model-audio chunks, 20 ms and more apart.
func TestVoiceSessionBetweenChunksHoldsOnlyItsTwoReaders(t *testing.T) {
	r := startRelay(t)
	for range 20 {
		r.chunk()
	}
	var dump string
	if err := testwait.Poll(func() error {
		dump = strings.Join(testwait.Stacks(), "\n\n")
		if n := strings.Count(dump, "created by github.com/turnstile-gw/turnstile/session.(*queue)"); n != 0 {
			return fmt.Errorf("%d writers running", n)
		}
		if n := strings.Count(dump, "created by github.com/turnstile-gw/turnstile/session"); n != 1 {
			return fmt.Errorf("%d goroutines of the session packages, want 1 (the pump)", n)
		}
		if n := strings.Count(dump, "wsbuf.(*sockReader).reads("); n > 2 {
			return fmt.Errorf("%d read coroutines, want at most 2 (the upstream's, the browser's)", n)
		}
		return nil
	}); err != nil {
		t.Fatalf("%v:\n%s", err, dump)
	}
}

// While audio streams, each model-audio frame goes to the browser from
// the voice pump itself: no writer goroutine is woken for it, neither for
// a frame that comes between chunks nor chunk after chunk of a relay
// (turnstile_audio_out_frames_total counts every frame as direct, none as
// queued).
func TestVoiceRelayWritesModelAudioFromThePumpWithoutWakingAWriter(t *testing.T) {
	r := startRelay(t)
	ch := session.ChannelBrowser.String()
	direct, queued := r.m.AudioOut.WithLabelValues(ch, "direct"), r.m.AudioOut.WithLabelValues(ch, "queued")
	// The writer that wrote session.ready and mode may not have ended yet
	// when the first chunks' audio arrives: it would take those frames.
	testwait.ForNil(t, "a frame written by the pump", func() error {
		before := testutil.ToFloat64(direct)
		r.chunk()
		if testutil.ToFloat64(direct) == before {
			return fmt.Errorf("the frame was queued (%v queued so far)", testutil.ToFloat64(queued))
		}
		return nil
	})
	d0, q0 := testutil.ToFloat64(direct), testutil.ToFloat64(queued)
	const chunks = 50
	for range chunks {
		r.chunk()
	}
	if d, q := testutil.ToFloat64(direct)-d0, testutil.ToFloat64(queued)-q0; d != chunks || q != 0 {
		t.Fatalf("of %d model-audio frames %v went out from the pump and %v through a writer goroutine, want all from the pump",
			chunks, d, q)
	}
}
