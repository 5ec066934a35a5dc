package audio

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// tone renders n samples of a sine of freq Hz at rate, peak amp (of full
// scale), as PCM16LE.
func tone(freq, rate float64, amp float64, n int) []byte {
	pcm := make([]byte, 0, 2*n)
	for i := range n {
		v := amp * math.MaxInt16 * math.Sin(2*math.Pi*freq*float64(i)/rate)
		pcm = binary.LittleEndian.AppendUint16(pcm, uint16(int16(math.Round(v))))
	}
	return pcm
}

func samples(pcm []byte) []float64 {
	s := make([]float64, len(pcm)/2)
	for i := range s {
		s[i] = float64(int16(binary.LittleEndian.Uint16(pcm[2*i:])))
	}
	return s
}

// fit is the least-squares sine at freq over x (a whole number of its
// periods): its peak amplitude, and the signal-to-noise ratio in dB of x
// against it — everything that is not that sine (distortion, quantisation,
// aliases, images) counts as noise.
func fit(x []float64, freq, rate float64) (amp, snrDB float64) {
	var a, b float64
	for i, v := range x {
		w := 2 * math.Pi * freq * float64(i) / rate
		a += v * math.Sin(w)
		b += v * math.Cos(w)
	}
	a, b = 2*a/float64(len(x)), 2*b/float64(len(x))
	var sig, noise float64
	for i, v := range x {
		w := 2 * math.Pi * freq * float64(i) / rate
		f := a*math.Sin(w) + b*math.Cos(w)
		sig += f * f
		noise += (v - f) * (v - f)
	}
	return math.Hypot(a, b), 10 * math.Log10(sig/noise)
}

func rms(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v * v
	}
	return math.Sqrt(s / float64(len(x)))
}

func db(ratio float64) float64 { return 20 * math.Log10(ratio) }

// steady drops the filter's start-up (well past its length) and keeps n
// samples.
func steady(x []float64, n int) []float64 { return x[200 : 200+n] }

// A caller's 1 kHz tone, as Twilio sends it (μ-law at 8 kHz), reaches the
// model at 16 kHz as the same 1 kHz tone at the same level, 30 dB above
// everything else.
func TestInboundKeepsOneKilohertzToneAt30dB(t *testing.T) {
	const amp = 0.5
	mulaw := AppendMulaw(nil, tone(1000, CarrierRate, amp, 8000))
	out := samples(NewInbound().Convert(nil, mulaw))
	if len(out) != 16000 {
		t.Fatalf("1 s at 8 kHz became %d samples, want 16000", len(out))
	}
	got, snr := fit(steady(out, 3200), 1000, InputRate)
	if snr < 30 {
		t.Errorf("SNR of the 1 kHz tone at 16 kHz = %.1f dB, want >= 30", snr)
	}
	if g := db(got / (amp * math.MaxInt16)); math.Abs(g) > 0.5 {
		t.Errorf("1 kHz gain through Inbound = %.2f dB, want within ±0.5", g)
	}
}

// The model's 1 kHz tone at 24 kHz reaches the caller as the same 1 kHz
// tone in μ-law at 8 kHz, 30 dB above everything else.
func TestOutboundKeepsOneKilohertzToneAt30dB(t *testing.T) {
	const amp = 0.5
	mulaw := NewOutbound().Convert(nil, tone(1000, OutputRate, amp, 24000))
	if len(mulaw) != 8000 {
		t.Fatalf("1 s at 24 kHz became %d μ-law bytes, want 8000", len(mulaw))
	}
	out := samples(AppendPCM(nil, mulaw))
	got, snr := fit(steady(out, 3200), 1000, CarrierRate)
	if snr < 30 {
		t.Errorf("SNR of the 1 kHz tone at 8 kHz = %.1f dB, want >= 30", snr)
	}
	if g := db(got / (amp * math.MaxInt16)); math.Abs(g) > 0.5 {
		t.Errorf("1 kHz gain through Outbound = %.2f dB, want within ±0.5", g)
	}
}

// Tones the model says above the telephone band never fold back into it
// as alias tones (sample dropping would turn 5 kHz into a loud 3 kHz), and
// the band itself passes flat. (Between 4 and 4.4 kHz a tone folds to
// 3.6–4 kHz, above the band: the transition, not tested.)
func TestOutboundFiltersWhatWouldFoldIntoTheBand(t *testing.T) {
	const amp = 0.5
	for _, tc := range []struct {
		freq    float64
		minDB   float64 // gain at least
		maxDB   float64 // gain at most (-Inf: μ-law's zero, nothing left)
		purpose string
	}{
		{300, -0.5, 0.5, "pass band"},
		{3000, -0.5, 0.5, "pass band"},
		{4500, math.Inf(-1), -40, "stop band"},
		{5000, math.Inf(-1), -40, "stop band, the issue's 5 kHz"},
		{7000, math.Inf(-1), -40, "stop band"},
		{11000, math.Inf(-1), -40, "stop band"},
	} {
		out := samples(AppendPCM(nil, NewOutbound().Convert(nil, tone(tc.freq, OutputRate, amp, 24000))))
		in := amp * math.MaxInt16 / math.Sqrt2
		g := db(rms(steady(out, 4000)) / in)
		if g < tc.minDB || g > tc.maxDB {
			t.Errorf("%.0f Hz (%s): gain %.1f dB, want between %.1f and %.1f", tc.freq, tc.purpose, g, tc.minDB, tc.maxDB)
		}
	}
}

// Up-sampling 8 → 16 kHz makes a mirror image of the call's audio above
// 4 kHz (a 1 kHz tone also appears at 7 kHz); the filter removes it.
func TestInboundRemovesTheImageAboveFourKilohertz(t *testing.T) {
	const amp = 0.5
	mulaw := AppendMulaw(nil, tone(1000, CarrierRate, amp, 8000))
	out := steady(samples(NewInbound().Convert(nil, mulaw)), 3200)
	image, _ := fit(out, 7000, InputRate)
	if g := db(image / (amp * math.MaxInt16)); g > -40 {
		t.Errorf("the 7 kHz image of a 1 kHz tone is at %.1f dB, want <= -40", g)
	}
}

// Converting a stream in 20 ms frames, or in chunks of any size (odd byte
// counts of PCM included), gives exactly the bytes of converting it whole:
// the filters carry their state across frame edges, so there are no
// clicks.
func TestFrameByFrameEqualsWholeBuffer(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	noise := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	mulaw, pcm := noise(8000), noise(48000)
	chunkings := map[string]func(int) int{
		"20 ms frames": nil,
		"random sizes": func(int) int { return 1 + rng.IntN(333) },
		"single bytes": func(int) int { return 1 },
	}
	for name, size := range chunkings {
		t.Run(name, func(t *testing.T) {
			in, out := NewInbound(), NewOutbound()
			var gotIn, gotOut []byte
			for rest := mulaw; len(rest) > 0; {
				n := MulawFrame
				if size != nil {
					n = size(len(rest))
				}
				n = min(n, len(rest))
				gotIn = in.Convert(gotIn, rest[:n])
				rest = rest[n:]
			}
			for rest := pcm; len(rest) > 0; {
				n := 3 * 2 * MulawFrame
				if size != nil {
					n = size(len(rest))
				}
				n = min(n, len(rest))
				gotOut = out.Convert(gotOut, rest[:n])
				rest = rest[n:]
			}
			if want := NewInbound().Convert(nil, mulaw); !bytes.Equal(gotIn, want) {
				t.Errorf("Inbound in pieces differs from whole (%d vs %d bytes)", len(gotIn), len(want))
			}
			if want := NewOutbound().Convert(nil, pcm); !bytes.Equal(gotOut, want) {
				t.Errorf("Outbound in pieces differs from whole (%d vs %d bytes)", len(gotOut), len(want))
			}
		})
	}
}

// Reset makes a converter behave as a new one: an interrupted answer's
// tail does not leak into the next.
func TestResetForgetsThePreviousStream(t *testing.T) {
	pcm := tone(1000, OutputRate, 0.5, 2400)
	mulaw := AppendMulaw(nil, tone(1000, CarrierRate, 0.5, 800))
	in, out := NewInbound(), NewOutbound()
	in.Convert(nil, mulaw[:333])
	out.Convert(nil, pcm[:777]) // ends mid-sample
	in.Reset()
	out.Reset()
	if got, want := in.Convert(nil, mulaw), NewInbound().Convert(nil, mulaw); !bytes.Equal(got, want) {
		t.Error("Inbound after Reset differs from a new one")
	}
	if got, want := out.Convert(nil, pcm), NewOutbound().Convert(nil, pcm); !bytes.Equal(got, want) {
		t.Error("Outbound after Reset differs from a new one")
	}
}

// A 20 ms frame converts without allocating when the caller's buffer has
// the documented room.
func TestConvertDoesNotAllocateWithRoom(t *testing.T) {
	mulaw := AppendMulaw(nil, tone(1000, CarrierRate, 0.5, MulawFrame))
	pcm := tone(1000, OutputRate, 0.5, 3*MulawFrame)
	in, out := NewInbound(), NewOutbound()
	inBuf := make([]byte, 0, InboundLen(len(mulaw)))
	outBuf := make([]byte, 0, OutboundMaxLen(len(pcm)))
	if n := testing.AllocsPerRun(100, func() { inBuf = in.Convert(inBuf[:0], mulaw) }); n != 0 {
		t.Errorf("Inbound.Convert: %.1f allocations per 20 ms frame, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { outBuf = out.Convert(outBuf[:0], pcm[:len(pcm)-1]) }); n != 0 {
		t.Errorf("Outbound.Convert: %.1f allocations per 20 ms frame, want 0", n)
	}
}

// A WAV file at another rate reaches the caller with the same care: the
// 1 kHz tone intact, 5 kHz gone.
func TestOutboundFromOtherRates(t *testing.T) {
	const amp = 0.5
	for _, rate := range []int{16000, 44100, 48000} {
		out, err := NewOutboundFrom(rate)
		if err != nil {
			t.Fatal(err)
		}
		tone1k := samples(AppendPCM(nil, out.Convert(nil, tone(1000, float64(rate), amp, rate))))
		if len(tone1k) < 7999 || len(tone1k) > 8001 {
			t.Fatalf("%d Hz: 1 s became %d samples at 8 kHz", rate, len(tone1k))
		}
		if _, snr := fit(steady(tone1k, 3200), 1000, CarrierRate); snr < 30 {
			t.Errorf("%d Hz: SNR of a 1 kHz tone = %.1f dB, want >= 30", rate, snr)
		}
		out, _ = NewOutboundFrom(rate)
		tone5k := samples(AppendPCM(nil, out.Convert(nil, tone(5000, float64(rate), amp, rate))))
		if g := db(rms(steady(tone5k, 4000)) / (amp * math.MaxInt16 / math.Sqrt2)); g > -40 {
			t.Errorf("%d Hz: a 5 kHz tone comes out at %.1f dB, want <= -40", rate, g)
		}
	}
	for _, rate := range []int{8000, 4000, 400000} {
		if _, err := NewOutboundFrom(rate); err == nil {
			t.Errorf("NewOutboundFrom(%d) = nil error, want a refusal", rate)
		}
	}
}
