package web

import (
	"encoding/json"
	"math"
	"math/cmplx"
	"reflect"
	"strings"
	"testing"
)

// These tests run the page's voice modules under Node: the microphone's
// sample-rate conversion and framing (audio.js), the playback queue
// (playback.js) and the per-turn transcript assembly (transcripts.js).

// tone is the amplitude of the frequency freq in x (sampled at rate) over
// a window holding a whole number of its cycles: 2/N·|Σ x[n]·e^(−2πi·f·n/rate)|.
func tone(x []float64, freq, rate float64) float64 {
	var sum complex128
	for n, v := range x {
		sum += complex(v, 0) * cmplx.Exp(complex(0, -2*math.Pi*freq*float64(n)/rate))
	}
	return 2 * cmplx.Abs(sum) / float64(len(x))
}

func zeroCrossings(x []float64) int {
	n := 0
	for i := 1; i < len(x); i++ {
		if (x[i-1] < 0) != (x[i] < 0) {
			n++
		}
	}
	return n
}

type toneSpec struct {
	Freq float64 `json:"freq"`
	Amp  float64 `json:"amp"`
}

func resample(t *testing.T, inRate int, tones ...toneSpec) []float64 {
	t.Helper()
	arg, _ := json.Marshal(map[string]any{"inRate": inRate, "tones": tones, "seconds": 1, "chunk": 128})
	var out []float64
	if err := json.Unmarshal([]byte(runNode(t, "resample", string(arg))), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMicrophoneAudioIsSixteenKilohertzInFortyMillisecondFrames(t *testing.T) {
	var got map[string]int
	if err := json.Unmarshal([]byte(runNode(t, "constants", "")), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"MIC_RATE": 16000, "PLAYBACK_RATE": 24000, "FRAME_SAMPLES": 640, "FRAME_BYTES": 1280}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("audio constants %v, want %v", got, want)
	}
	// The doc's recommended frame sizes must include the page's.
	doc := protocolDoc(t)
	for _, s := range []string{"PCM16 little-endian mono 16 kHz", "PCM16 little-endian mono 24 kHz", "640–3200 bytes", "1280 bytes"} {
		if !strings.Contains(doc, s) {
			t.Errorf("docs/protocol.md does not say %q", s)
		}
	}
}

func TestResamplingToSixteenKilohertzKeepsSpeechAndDropsWhatWouldAlias(t *testing.T) {
	cases := []struct {
		name   string
		inRate int
		tones  []toneSpec
		want1k float64 // amplitude of 1 kHz in the output
		alias  float64 // a frequency that must not appear (folded back), or 0
	}{
		{"48 kHz", 48000, []toneSpec{{1000, 0.5}}, 0.5, 0},
		{"44.1 kHz", 44100, []toneSpec{{1000, 0.5}}, 0.5, 0},
		{"16 kHz passes through", 16000, []toneSpec{{1000, 0.5}}, 0.5, 0},
		{"stereo is averaged", 48000, []toneSpec{{1000, 0.5}, {1000, 0}}, 0.25, 0},
		// 12 kHz is above 16 kHz's Nyquist frequency: without the low-pass it
		// would fold back to 4 kHz.
		{"12 kHz at 48 kHz", 48000, []toneSpec{{1000, 0.5}, {12000, 0.5}}, 0.25, 4000},
		{"12 kHz at 44.1 kHz", 44100, []toneSpec{{1000, 0.5}, {12000, 0.5}}, 0.25, 4000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := resample(t, tc.inRate, tc.tones...)
			if len(out) < 15999 || len(out) > 16001 {
				t.Fatalf("1 s at %d Hz gave %d samples, want 16000", tc.inRate, len(out))
			}
			// Past the filter's start-up: 0.5 s, 500 whole cycles of 1 kHz.
			win := out[1000:9000]
			if got := tone(win, 1000, 16000); math.Abs(got-tc.want1k) > 0.02*tc.want1k {
				t.Errorf("1 kHz amplitude %.4f, want %.4f ± 2%%", got, tc.want1k)
			}
			if got := tone(win, 1100, 16000); got > 0.01 {
				t.Errorf("energy at 1.1 kHz %.4f: the tone moved or spread", got)
			}
			if tc.alias > 0 {
				if got := tone(win, tc.alias, 16000); got > 0.005 {
					t.Errorf("%.0f Hz alias amplitude %.4f, want < 0.005 (−40 dB)", tc.alias, got)
				}
			} else if got := zeroCrossings(win); got < 998 || got > 1002 {
				t.Errorf("%d zero crossings in 0.5 s, want 1000 (a 1 kHz tone)", got)
			}
			peak := 0.0
			for _, v := range win {
				peak = math.Max(peak, math.Abs(v))
			}
			if tc.alias == 0 && math.Abs(peak-tc.want1k) > 0.02*tc.want1k {
				t.Errorf("peak %.4f, want %.4f", peak, tc.want1k)
			}
		})
	}
}

func TestFramesAreExactlyFortyMillisecondsAndSamplesClip(t *testing.T) {
	arg := `{"chunks":[42,43,43,128,1,0,639,640,641,1000],` +
		`"values":[0,0.5,-0.5,1,-1,1.5,-1.5,1e9,-1e9,"NaN",0.00001,-0.99999]}`
	var got struct {
		Sizes []int     `json:"sizes"`
		Tail  int       `json:"tail"`
		Again any       `json:"again"`
		PCM   []int     `json:"pcm"`
		Back  []float64 `json:"back"`
	}
	if err := json.Unmarshal([]byte(runNode(t, "frames", arg)), &got); err != nil {
		t.Fatal(err)
	}
	// 3177 samples in uneven chunks: four whole frames of 640, 617 left over.
	if want := []int{1280, 1280, 1280, 1280}; !reflect.DeepEqual(got.Sizes, want) {
		t.Errorf("frame sizes %v, want %v", got.Sizes, want)
	}
	if got.Tail != 617*2 || got.Again != nil {
		t.Errorf("flush gave %d bytes then %v, want 1234 then nothing", got.Tail, got.Again)
	}
	// Full scale is 32767 up and 32768 down; beyond it the samples clip.
	wantPCM := []int{0, 16384, -16384, 32767, -32768, 32767, -32768, 32767, -32768, 0, 0, -32768}
	if !reflect.DeepEqual(got.PCM, wantPCM) {
		t.Errorf("PCM16 values %v, want %v", got.PCM, wantPCM)
	}
	wantBack := []float64{0, 0.5, -0.5, 0.99997, -1, 0.99997, -1, 0.99997, -1, 0, 0, -1}
	if !reflect.DeepEqual(got.Back, wantBack) {
		t.Errorf("PCM16 read back as %v, want %v", got.Back, wantBack)
	}
}

type playStep struct {
	Op     string          `json:"op"`
	Result json.RawMessage `json:"result"`
	State  string          `json:"state"`
	Buf    int             `json:"buffered"`
	Played int             `json:"played"`
	Drop   int             `json:"dropped"`
	Flush  int             `json:"flushed"`
	Under  int             `json:"underruns"`
}

type rendered struct {
	Nonzero int     `json:"nonzero"`
	First   float64 `json:"first"`
	Last    float64 `json:"last"`
	Max     float64 `json:"max"`
}

func runPlayback(t *testing.T, outRate, startMs, maxSeconds int, steps ...map[string]any) []playStep {
	t.Helper()
	arg, _ := json.Marshal(map[string]any{"outRate": outRate, "startMs": startMs, "maxSeconds": maxSeconds, "steps": steps})
	var out []playStep
	for _, line := range strings.Split(strings.TrimSpace(runNode(t, "playback", string(arg))), "\n") {
		var s playStep
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("harness line %q: %v", line, err)
		}
		out = append(out, s)
	}
	if len(out) != len(steps) {
		t.Fatalf("harness ran %d of %d steps", len(out), len(steps))
	}
	return out
}

func renderResult(t *testing.T, s playStep) rendered {
	t.Helper()
	var r rendered
	if err := json.Unmarshal(s.Result, &r); err != nil {
		t.Fatalf("render result %s: %v", s.Result, err)
	}
	return r
}

func push(n int) map[string]any   { return map[string]any{"op": "push", "n": n} }
func render(n int) map[string]any { return map[string]any{"op": "render", "n": n} }

func TestPlaybackWaitsForAJitterBufferThenPlaysAtTheContextRate(t *testing.T) {
	// 24 kHz into a 48 kHz context, start at 100 ms (2400 input samples).
	steps := runPlayback(t, 48000, 100, 60,
		push(1200),   // 0: 50 ms
		render(128),  // 1: not enough yet: silence
		push(1200),   // 2: 100 ms: enough
		render(4800), // 3: 100 ms of output: all the speech (2400 in → ~4800 out)
		render(128),  // 4: ran dry: silence, idle
	)
	if steps[0].State != "buffering" || steps[1].State != "buffering" {
		t.Errorf("with 50 ms queued: %s then %s, want buffering", steps[0].State, steps[1].State)
	}
	if r := renderResult(t, steps[1]); r.Nonzero != 0 {
		t.Errorf("played %d samples before the jitter buffer filled", r.Nonzero)
	}
	r := renderResult(t, steps[3])
	if r.Nonzero < 4790 || r.Max != 0.5 {
		t.Errorf("playing 100 ms at 24 → 48 kHz gave %d non-silent samples (max %v), want ~4800 of 0.5", r.Nonzero, r.Max)
	}
	if steps[3].Played != 2400 || steps[4].State != "idle" || steps[4].Buf != 0 {
		t.Errorf("after playing: played %d, state %s, buffered %d; want 2400, idle, 0", steps[3].Played, steps[4].State, steps[4].Buf)
	}
	if r := renderResult(t, steps[4]); r.Nonzero != 0 {
		t.Errorf("%d non-silent samples after the queue ran dry", r.Nonzero)
	}
	if steps[4].Under != 0 {
		t.Errorf("underruns %d at the end of an answer, want 0", steps[4].Under)
	}
}

func TestPlaybackStartsAShortAnswerAfterSilenceAndCountsUnderruns(t *testing.T) {
	steps := runPlayback(t, 48000, 100, 60,
		push(480),    // 0: a 20 ms answer, below the 100 ms threshold
		render(2304), // 1: 48 ms: still waiting for more
		render(2560), // 2: 100 ms without new audio: plays what there is
		push(480),    // 3: more speech right after running dry: an underrun
		render(4800), // 4: waits again, then plays
		render(4800), // 5
		render(9600), // 6: a long silence
		push(480),    // 7: a new answer: not an underrun
	)
	if r := renderResult(t, steps[1]); r.Nonzero != 0 || steps[1].State != "buffering" {
		t.Errorf("48 ms after a short answer: %d samples played, state %s; want 0, buffering", r.Nonzero, steps[1].State)
	}
	if r := renderResult(t, steps[2]); r.Nonzero < 950 || steps[2].Played != 480 {
		t.Errorf("after 100 ms of quiet: %d samples played (%d input), want the whole 20 ms", r.Nonzero, steps[2].Played)
	}
	if steps[3].Under != 1 {
		t.Errorf("underruns %d after audio resumed 0 ms after running dry, want 1", steps[3].Under)
	}
	if steps[5].Played != 960 {
		t.Errorf("played %d input samples after the underrun, want 960", steps[5].Played)
	}
	if steps[7].Under != 1 {
		t.Errorf("a new answer after a long silence counted as an underrun (%d)", steps[7].Under)
	}
}

func TestPlaybackFlushDropsEverythingQueuedAtOnce(t *testing.T) {
	steps := runPlayback(t, 44100, 150, 1,
		push(24000),  // 0: 1 s, the queue's bound
		push(100),    // 1: over the bound: dropped
		render(4410), // 2: 100 ms plays
		flush(),      // 3: barge-in
		render(128),  // 4: silence at once
		push(2400),   // 5: the next answer buffers from scratch
		render(128),  // 6
	)
	if string(steps[1].Result) != "0" || steps[1].Drop != 100 {
		t.Errorf("push over the bound took %s, dropped %d; want 0 and 100", steps[1].Result, steps[1].Drop)
	}
	if r := renderResult(t, steps[2]); r.Nonzero < 4400 || steps[2].State != "playing" {
		t.Errorf("100 ms at 44.1 kHz: %d samples, state %s", r.Nonzero, steps[2].State)
	}
	played := steps[2].Played
	if played < 2395 || played > 2402 {
		t.Errorf("100 ms at 24 → 44.1 kHz consumed %d input samples, want ~2400", played)
	}
	if string(steps[3].Result) != itoa(24000-played) || steps[3].Flush != 24000-played || steps[3].Buf != 0 || steps[3].State != "idle" {
		t.Errorf("flush: %s samples, flushed %d, buffered %d, state %s; want %d, 0, idle",
			steps[3].Result, steps[3].Flush, steps[3].Buf, steps[3].State, 24000-played)
	}
	if r := renderResult(t, steps[4]); r.Nonzero != 0 {
		t.Errorf("%d samples played after the flush", r.Nonzero)
	}
	if r := renderResult(t, steps[6]); r.Nonzero != 0 || steps[6].State != "buffering" {
		t.Errorf("the next answer started without its jitter buffer: %d samples, %s", r.Nonzero, steps[6].State)
	}
}

func flush() map[string]any { return map[string]any{"op": "flush"} }

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

type turnText struct {
	User   string `json:"user"`
	Text   string `json:"text"`
	Final  bool   `json:"final"`
	Spoken bool   `json:"spoken"`
}

func TestTranscriptsAreAssembledByTurnWhateverTheirOrder(t *testing.T) {
	events := [][]any{
		{"output", 1, "Hel"}, // the model's words before the user's transcription
		{"start", 1, ""},
		{"input", 2, "And "}, // the next turn's words before turn 1 is over
		{"output", 1, "lo!"},
		{"input", 1, "Hi "},
		{"input", 1, "there"},
		{"done", 1, "Hello!"},
		{"output", 1, " (late)"}, // after the final answer: ignored on screen
		{"input", 1, "."},        // a late input piece still lands in turn 1
		{"input", 2, "you?"},
		{"start", 2, ""},
		{"start", 3, "typed in voice"}, // a typed message: no transcription
		{"delta", 3, "Sure"},
		{"start", 4, "What"},
		{"input", 4, "What time is it"}, // the gateway repeated the first words
		{"start", 5, "Book"},
		{"input", 5, " a table"}, // or sent only the rest
	}
	var got map[string]turnText
	arg, _ := json.Marshal(events)
	if err := json.Unmarshal([]byte(runNode(t, "texts", string(arg))), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]turnText{
		"1": {User: "Hi there.", Text: "Hello!", Final: true, Spoken: true},
		"2": {User: "And you?", Spoken: true},
		"3": {User: "typed in voice", Text: "Sure"},
		"4": {User: "What time is it", Spoken: true},
		"5": {User: "Book a table", Spoken: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("assembled\n got %+v\nwant %+v", got, want)
	}
}
