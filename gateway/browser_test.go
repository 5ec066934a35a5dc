package gateway_test

// The web page in a real headless Chromium whose microphone plays a WAV file
// (DESIGN §11): the page connects, the user presses the microphone, speaks,
// and hears and reads the demo model's answer.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/turnstile-gw/turnstile/internal/logtest"
)

// The conversation must be over this long after the page opened.
const browserConversationTimeout = 30 * time.Second

// The microphone's recording: this much speech, then silence long enough for
// the demo model to hear the speech end (~600 ms).
const (
	wavRate     = 48000
	wavSpeech   = 1500 * time.Millisecond
	wavSilence  = 2000 * time.Millisecond
	wavPeak     = 0.6 // of full scale, well above the demo's -30 dBFS threshold
	wavPitchHz  = 220
	wavSyllable = 4 // amplitude modulation, in Hz: about the rate of syllables
)

func TestBrowserVoiceConversationWithFakeMicrophone(t *testing.T) {
	chromium := findChromium(t)
	g := startGateway(t, defaultTestConfig(t), nil)
	wav := filepath.Join(t.TempDir(), "speech.wav")
	if err := writeSpeechWAV(wav); err != nil {
		t.Fatal(err)
	}
	b := startBrowser(t, chromium, wav)

	ctx, cancel := context.WithTimeout(b.ctx, browserConversationTimeout)
	defer cancel()
	b.do(ctx, "open the page", chromedp.Navigate(g.url+"/?debug=1"))
	b.waitFor(ctx, "the page to connect in text mode",
		`window.__turnstile?.connected === true && __turnstile.mode === "text" &&
		 document.getElementById("status").dataset.state === "connected" && !document.getElementById("mic").disabled`)

	b.do(ctx, "press the microphone", chromedp.Click(chromedp.ID("mic")))
	b.waitFor(ctx, "the session to switch to voice with the microphone on",
		`__turnstile.mode === "voice" && __turnstile.mic === "on" &&
		 document.getElementById("voice-mode").dataset.mode === "voice" &&
		 document.getElementById("mic").getAttribute("aria-pressed") === "true"`)
	// One second of 40 ms frames.
	b.waitFor(ctx, "the microphone's audio to stream", `__turnstile.framesSent >= 25`)
	b.waitFor(ctx, "the spoken answer to be played and shown",
		`__turnstile.bytesPlayed > 0 && __turnstile.transcriptsOutput > 0 &&
		 (__turnstile.messages["turn.done"] ?? 0) >= 1 &&
		 [...document.querySelectorAll("#transcript .msg.model")].some((m) => m.textContent.includes("I heard"))`)
	b.waitFor(ctx, "the answer to finish playing", `__turnstile.playback === "idle"`)

	type turnView struct {
		Turn          int
		UserBubble    string
		ModelBubble   string
		Said          string
		Answer        string
		Errors        []string
		FramesSent    int
		AudioReceived int
		BytesPlayed   int
		BytesFlushed  int
		MicRate       int
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[turnView](`(() => {
		const li = document.querySelector("#transcript li.turn.spoken");
		const n = li === null ? 0 : Number(li.dataset.turn);
		const text = (sel) => li?.querySelector(sel)?.textContent ?? "";
		const t = __turnstile;
		return {
			Turn: n,
			UserBubble: text(".msg.user .text"),
			ModelBubble: text(".msg.model .text"),
			Said: t.turnText(n).user,
			Answer: t.turnText(n).model,
			Errors: [...document.querySelectorAll(".note.error, .note.warn")].map((e) => e.textContent),
			FramesSent: t.framesSent,
			AudioReceived: t.audioBytesReceived,
			BytesPlayed: t.bytesPlayed,
			BytesFlushed: t.bytesFlushed,
			MicRate: t.micSampleRate,
		};
	})()`))
	if err != nil {
		b.fail(fmt.Sprintf("read the conversation: %v", err))
	}
	t.Logf("page: %+v", got)

	if got.Turn < 1 {
		b.fail("no spoken turn in the transcript")
	}
	if !strings.Contains(got.UserBubble, "(speech)") || got.UserBubble != got.Said {
		b.fail(fmt.Sprintf("user bubble %q, turn text %q: want the input transcription", got.UserBubble, got.Said))
	}
	if got.ModelBubble != got.Answer {
		b.fail(fmt.Sprintf("answer bubble %q differs from the turn's output transcription %q", got.ModelBubble, got.Answer))
	}
	// The demo model measures the speech it heard: the microphone path
	// (capture, resampling to 16 kHz, 40 ms frames) kept its length.
	m := regexp.MustCompile(`I heard ([0-9.]+) seconds of speech`).FindStringSubmatch(got.ModelBubble)
	if m == nil {
		b.fail(fmt.Sprintf("answer %q does not say how much speech was heard", got.ModelBubble))
	}
	if heard, _ := strconv.ParseFloat(m[1], 64); heard < 1.0 || heard > 2.0 {
		b.fail(fmt.Sprintf("the model heard %.1f s of speech, the microphone played %v", heard, wavSpeech))
	}
	// The whole answer was played, not cut short (nothing was flushed).
	if got.BytesFlushed != 0 || got.BytesPlayed < got.AudioReceived*9/10 {
		b.fail(fmt.Sprintf("played %d of %d bytes received (%d flushed)", got.BytesPlayed, got.AudioReceived, got.BytesFlushed))
	}
	if len(got.Errors) > 0 {
		b.fail(fmt.Sprintf("the page shows problems: %q", got.Errors))
	}
}

// findChromium returns the browser to drive: $CHROMIUM, else chromium on
// the PATH. Without one the test is skipped, except in CI.
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium found (set CHROMIUM, or install it: `make test` runs scripts/install-test-deps, which does)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// chromiumTab is one headless Chromium with a tab.
type chromiumTab struct {
	t   *testing.T
	ctx context.Context // the tab's
	out *browserOutput  // the browser's stdout and stderr
	// debugExpr is JavaScript giving, as a string, what fail reports of the
	// page; default: the demo page's debug counters and text.
	debugExpr string
}

// startBrowser starts Chromium with a fresh profile whose microphone plays
// wav once, and opens a blank tab; extra are further options. It is
// stopped, and its goroutines are gone, when the test ends.
func startBrowser(t *testing.T, path, wav string, extra ...chromedp.ExecAllocatorOption) *chromiumTab {
	t.Helper()
	out := &browserOutput{}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.CombinedOutput(out),
		chromedp.WindowSize(1024, 768),
	}
	for _, f := range []string{
		"headless", "no-sandbox", "disable-gpu", "no-first-run", "no-default-browser-check", "hide-scrollbars",
		// Nothing but loopback: no updates, sync, metrics or lookups.
		"disable-quic", "disable-background-networking", "disable-component-update", "disable-sync",
		"disable-domain-reliability", "disable-client-side-phishing-detection", "disable-default-apps",
		"disable-extensions", "disable-breakpad", "metrics-recording-only",
		// Timers and audio keep running in a page nobody looks at.
		"disable-background-timer-throttling", "disable-renderer-backgrounding", "disable-backgrounding-occluded-windows",
		// A microphone that needs no permission prompt and plays wav.
		"use-fake-ui-for-media-stream", "use-fake-device-for-media-stream",
	} {
		opts = append(opts, chromedp.Flag(f, true))
	}
	opts = append(opts,
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.Flag("use-file-for-fake-audio-capture", wav+"%noloop"),
		chromedp.Flag("autoplay-policy", "no-user-gesture-required"),
	)
	opts = append(opts, extra...)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	// Closing the browser lets it stop its helper processes; the cancels
	// then wait for the process and for the goroutines that watch it.
	t.Cleanup(func() {
		if err := chromedp.Cancel(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("close the browser: %v", err)
		}
		cancelTab()
		cancelAlloc()
	})
	b := &chromiumTab{t: t, ctx: ctx, out: out}

	// The first action starts the browser; its context lives as long as the
	// browser, so a start that hangs is cut off by a timer instead.
	watchdog := time.AfterFunc(30*time.Second, cancelAlloc)
	err := chromedp.Do(ctx)
	if !watchdog.Stop() {
		err = errors.Join(err, errors.New("gave up after 30 s"))
	}
	if err != nil {
		t.Fatalf("start %s: %v\n%s", path, err, out.tail(4000))
	}
	return b
}

func (b *chromiumTab) do(ctx context.Context, what string, a chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if _, err := chromedp.Run(ctx, a); err != nil {
		b.fail(fmt.Sprintf("%s: %v", what, err))
	}
}

// waitFor polls the JavaScript expression cond in the page until it is true
// or ctx ends.
func (b *chromiumTab) waitFor(ctx context.Context, what, cond string) {
	b.t.Helper()
	left := time.Until(tabDeadline(ctx))
	if left <= 0 {
		b.fail("timed out before waiting for " + what)
	}
	poll := chromedp.Poll[bool](cond, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(left))
	if _, err := chromedp.Run(ctx, poll); err != nil {
		b.fail(fmt.Sprintf("waiting for %s: %v", what, err))
	}
}

func tabDeadline(ctx context.Context) time.Time {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Now().Add(browserConversationTimeout)
	}
	return d
}

// fail ends the test with what the page showed: its debug counters, its
// text and a screenshot (kept with `go test -artifacts`), and the browser's
// output.
func (b *chromiumTab) fail(msg string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	expr := b.debugExpr
	if expr == "" {
		expr = `JSON.stringify({debug: window.__turnstile ?? null, page: document.body?.innerText ?? ""}, null, 1)`
	}
	state, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		state = fmt.Sprintf("(cannot read the page: %v)", err)
	}
	shot := "(none)"
	if png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot()); err == nil {
		shot = filepath.Join(b.t.ArtifactDir(), "page.png")
		if err := os.WriteFile(shot, png, 0o600); err != nil {
			shot = fmt.Sprintf("(cannot save: %v)", err)
		}
	}
	b.t.Fatalf("%s\npage state: %s\nscreenshot: %s (kept with go test -artifacts)\nbrowser output:\n%s",
		msg, state, shot, b.out.tail(4000))
}

// writeSpeechWAV writes 16-bit mono PCM: a voiced sound (a 220 Hz tone with
// harmonics, its loudness rising and falling like syllables), then silence.
func writeSpeechWAV(path string) error {
	speech := int(wavSpeech.Seconds() * wavRate)
	total := speech + int(wavSilence.Seconds()*wavRate)
	samples := make([]int16, total)
	fade := wavRate / 100 // 10 ms ramps: no clicks at the edges
	for i := range speech {
		tm := float64(i) / wavRate
		var v float64
		for h, a := range []float64{1, 0.5, 0.3, 0.2, 0.1} {
			v += a * math.Sin(2*math.Pi*wavPitchHz*float64(h+1)*tm)
		}
		v /= 2.1                                            // the harmonics' amplitudes summed
		v *= 0.75 + 0.25*math.Sin(2*math.Pi*wavSyllable*tm) // syllables, never silent
		v *= min(1, float64(i)/float64(fade), float64(speech-i)/float64(fade))
		samples[i] = int16(wavPeak * v * math.MaxInt16)
	}
	var buf bytes.Buffer
	dataLen := uint32(2 * total)
	for _, v := range []any{
		[4]byte{'R', 'I', 'F', 'F'}, 36 + dataLen, [4]byte{'W', 'A', 'V', 'E'},
		[4]byte{'f', 'm', 't', ' '}, uint32(16), uint16(1), uint16(1), // PCM, mono
		uint32(wavRate), uint32(2 * wavRate), uint16(2), uint16(16), // byte rate, block align, bits
		[4]byte{'d', 'a', 't', 'a'}, dataLen, samples,
	} {
		if err := binary.Write(&buf, binary.LittleEndian, v); err != nil {
			return fmt.Errorf("speech wav: %w", err)
		}
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("speech wav: %w", err)
	}
	return nil
}

// browserOutput collects the browser's output from chromedp's goroutines
// (or a gateway's log: startGatewayLogging).
type browserOutput struct{ logtest.Buffer }

// tail is the last n bytes written, without the complaints of a browser
// that finds no D-Bus (there is none in a container or on CI).
func (s *browserOutput) tail(n int) string {
	var out []string
	for line := range strings.Lines(s.String()) {
		if !strings.Contains(line, ":ERROR:dbus/") {
			out = append(out, line)
		}
	}
	all := strings.Join(out, "")
	return all[max(0, len(all)-n):]
}
