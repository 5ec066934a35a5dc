package gateway_test

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// callGateway runs `gateway call` against g with args, and returns its exit
// code and output.
func callGateway(t *testing.T, g *testGateway, args ...string) (int, string) {
	t.Helper()
	var stdout, stderr strings.Builder
	args = append([]string{"call", "-url", g.url + "/v1/telephony/twilio", "-timeout", "30s"}, args...)
	code := realMain(args, func(string) string { return "" }, &stdout, &stderr)
	t.Logf("gateway %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	return code, stdout.String() + stderr.String()
}

// The offline demo model answers a phone call as it answers a browser in
// voice: `gateway call` says the demo utterance, hears the answer (the
// demo's rising C-major triad, 0.96 s) in μ-law at 8 kHz, echoes its mark
// once played, hangs up, and writes what it heard to a WAV file.
func TestGatewayCallHearsTheDemoModelAnswer(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.TwilioAuthToken = "call-test-token"
	g := startGateway(t, cfg, nil)
	out := filepath.Join(t.TempDir(), "answer.wav")
	code, log := callGateway(t, g, "-out", out, "-twilio-auth-token", "call-test-token")
	if code != 0 || !strings.Contains(log, `answer 1: `) || !strings.Contains(log, `played to its mark "turn:1"`) {
		t.Fatalf("exit %d; want 0 and the first answer played to its mark", code)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	w, err := readWAV(f)
	if err != nil || w.rate != 8000 {
		t.Fatalf("answer.wav: %v, rate %d; want 8 kHz PCM16", err, w.rate)
	}
	// The three notes of 320 ms each, from the first sound on: each is
	// heard at its pitch (zero crossings over its middle 200 ms).
	start := 0
	for start < len(w.pcm)/2 && math.Abs(float64(sampleAt(w.pcm, start))) < 500 {
		start++
	}
	for i, want := range []float64{523.25, 659.25, 783.99} {
		from := start + i*2560 + 480 // 320 ms a note at 8 kHz; skip 60 ms of its edges
		got := pitch(w.pcm, from, 1600)
		t.Logf("note %d: %.1f Hz (want %.2f)", i+1, got, want)
		if math.Abs(got-want) > 0.03*want {
			t.Errorf("note %d of the answer is at %.0f Hz, want %.0f Hz", i+1, got, want)
		}
	}
}

// A caller without the account's auth token is refused before any TwiML.
func TestGatewayCallIsRefusedWithTheWrongAuthToken(t *testing.T) {
	cfg := defaultTestConfig(t)
	cfg.TwilioAuthToken = "call-test-token"
	g := startGateway(t, cfg, nil)
	code, log := callGateway(t, g, "-out", "", "-twilio-auth-token", "wrong")
	if code != 1 || !strings.Contains(log, "the webhook answered 403") {
		t.Fatalf("exit %d; want 1 and the webhook's 403", code)
	}
}

// Keys pressed on the call reach the model: the demo answers the note
// "the caller pressed 5" as it answers typed text, a second answer.
func TestGatewayCallPressesKeysAfterTheFirstAnswer(t *testing.T) {
	g := startGateway(t, defaultTestConfig(t), nil)
	code, log := callGateway(t, g, "-out", "", "-press", "5")
	if code != 0 || !strings.Contains(log, "pressed 5") || !strings.Contains(log, "answer 2: ") {
		t.Fatalf("exit %d; want 0, the key pressed and a second answer", code)
	}
}

func sampleAt(pcm []byte, i int) int16 { return int16(binary.LittleEndian.Uint16(pcm[2*i:])) }

// pitch estimates the frequency of n samples at 8 kHz from index from by
// counting sign changes.
func pitch(pcm []byte, from, n int) float64 {
	if 2*(from+n) > len(pcm) {
		return 0
	}
	crossings := 0
	for i := from + 1; i < from+n; i++ {
		if (sampleAt(pcm, i-1) < 0) != (sampleAt(pcm, i) < 0) {
			crossings++
		}
	}
	return float64(crossings) / 2 / (float64(n) / 8000)
}
