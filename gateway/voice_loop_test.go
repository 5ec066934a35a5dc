//go:build linux

package gateway_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/internal/tlstest"
)

// With TURNSTILE_VOICE_LOOP (the default) a voice session's audio crosses the
// gateway on an event loop both ways once the microphone streams, as it
// would without: microphone frames reach the model whole and in order,
// model audio reaches the browser in order with a transcript between its
// chunks where the model sent it, and the model audio is counted as
// written on the loop (turnstile_audio_out_frames_total{path="loop"}).
func TestVoiceOnAnEventLoopRelaysAudioBothWaysInOrder(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.VoiceLoop = true
	g, script := startVoiceGateway(t, cfg, nil)
	c, _, u := startInVoice(t, g, script)
	relaysAudioBothWaysOnTheLoop(t, g, c, u)
}

// So too with the browser connected over the gateway's own TLS
// (TURNSTILE_TLS_CERT_FILE): its socket joins the loop with its TLS.
func TestVoiceOnAnEventLoopOverTheGatewaysTLSRelaysAudioBothWaysInOrder(t *testing.T) {
	cert := tlstest.New(t, "turnstile")
	cfg := defaultTestConfig(t)
	cfg.VoiceLoop = true
	cfg.TLSCertFile, cfg.TLSKeyFile = cert.Files(t, t.TempDir())
	g, script := startVoiceGateway(t, cfg, nil)
	c, err := g.dialTLS(cert.Pool())
	if err != nil {
		t.Fatal(err)
	}
	_, u := startVoiceOn(t, c, script)
	relaysAudioBothWaysOnTheLoop(t, g, c, u)
}

// relaysAudioBothWaysOnTheLoop streams microphone audio from c and model
// audio from u, in voice on g with TURNSTILE_VOICE_LOOP: each reaches the
// other side whole and in order (a transcript between model chunks where
// the model sent it), and model audio is counted as written on the loop.
func relaysAudioBothWaysOnTheLoop(t *testing.T, g *testGateway, c *wsClient, u *upstream) {
	t.Helper()
	var mic []byte
	for i := range 50 {
		p := pcm(i, 640)
		must(t, c.sendAudio(p))
		mic = append(mic, p...)
	}
	testwait.For(t, "the microphone audio upstream", func() bool { return len(u.audio()) >= len(mic) })
	if !bytes.Equal(u.audio(), mic) {
		t.Fatal("the model got other microphone audio than the browser sent")
	}

	var before, after []byte
	for i := range 20 {
		p := pcm(100+i, 960)
		must(t, u.SendAudio(p))
		before = append(before, p...)
	}
	must(t, u.SendOutputTranscript("hello"))
	for i := range 5 {
		p := pcm(200+i, 960)
		must(t, u.SendAudio(p))
		after = append(after, p...)
	}
	must(t, u.SendTurnComplete(nil))
	var got []byte
	seenAt := -1
	for _, f := range c.recvUntil("turn.done") {
		if f.ev != nil && f.ev.typ() == "transcript.output" {
			seenAt = len(got)
		}
		got = append(got, f.audio...)
	}
	if !bytes.Equal(got, append(before, after...)) {
		t.Fatalf("the browser got %d bytes of other audio than the model sent (%d)", len(got), len(before)+len(after))
	}
	if seenAt != len(before) {
		t.Fatalf("the transcript came after %d bytes of audio, want %d: where the model sent it", seenAt, len(before))
	}
	// A frame goes out on the loop when nothing is queued before it: after
	// the burst above (its turn.start and transcript went through the
	// writer, and frames behind them with it), one at a time.
	for i := range 10 {
		must(t, u.SendAudio(pcm(300+i, 960)))
		c.recvAudio(960)
	}
	if n := seriesSum(t, g.reg, "turnstile_audio_out_frames_total", "path", "loop"); n < 1 {
		t.Fatalf("model audio frames written on the loop: %v, want some of the ten sent one at a time", n)
	}
}

// A browser whose socket an event loop serves and that stops reading while
// model audio streams is closed as too slow (4101) once what its socket
// has not taken passes the send queue's bound, as a full queue closes it
// without the loop; the model connection is hung up.
func TestVoiceOnAnEventLoopClosesABrowserThatStopsReadingTooSlow(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.VoiceLoop = true
	cfg.SendQueueBytes = 64 << 10
	cfg.WriteTimeout = time.Minute
	if tooSlow, failed := streamToABrowserThatStopsReading(t, cfg, true); tooSlow != 1 || failed != 0 {
		t.Fatalf("disconnects counted: too_slow %v, write_failed %v; want one too_slow", tooSlow, failed)
	}
}

// A browser whose socket joined an event loop gives its place among the
// node's connections back when it leaves (TURNSTILE_MAX_CONNECTIONS), over
// plain TCP and over the gateway's own TLS: the next browser is let in.
func TestVoiceOnAnEventLoopGivesTheConnectionsPlaceBackAtTheEnd(t *testing.T) {
	for _, overTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "ws", true: "wss"}[overTLS], func(t *testing.T) {
			cfg := defaultTestConfig(t)
			cfg.VoiceLoop = true
			cfg.MaxConnections = 1
			cfg.UnauthShare = 1
			cert := tlstest.New(t, "turnstile")
			if overTLS {
				cfg.TLSCertFile, cfg.TLSKeyFile = cert.Files(t, t.TempDir())
			}
			g, script := startVoiceGateway(t, cfg, nil)
			dial := func() (*wsClient, error) {
				if overTLS {
					return g.dialTLS(cert.Pool())
				}
				return g.tryDial("", nil)
			}
			c, err := dial()
			if err != nil {
				t.Fatal(err)
			}
			_, u := startVoiceOn(t, c, script)
			relaysAudioBothWaysOnTheLoop(t, g, c, u)
			_ = c.c.CloseNow()
			testwait.For(t, "the session's end", func() bool { return g.gw.sessions.Active() == 0 })
			next, err := dial()
			if err != nil {
				t.Fatalf("the next browser, the first gone: %v; want it let in", err)
			}
			next.start(nil)
		})
	}
}
