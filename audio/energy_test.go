package audio

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

func pcmOf(samples ...int16) []byte {
	b := make([]byte, 2*len(samples))
	for i, s := range samples {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(s))
	}
	return b
}

// A frame is speech from an RMS of SpeechRMS: a constant ±1000 is, ±999 is
// not, silence and an empty frame are not, and a sine's RMS is its
// amplitude over √2.
func TestLoudJudgesSpeechByRMS(t *testing.T) {
	sine := func(amp float64) []byte {
		s := make([]int16, 320) // 20 ms at 16 kHz, a whole number of 400 Hz periods
		for i := range s {
			s[i] = int16(amp * math.Sin(2*math.Pi*400*float64(i)/16000))
		}
		return pcmOf(s...)
	}
	for _, c := range []struct {
		name string
		pcm  []byte
		want bool
	}{
		{"empty", nil, false},
		{"one odd byte", []byte{0xff}, false},
		{"silence", make([]byte, 640), false},
		{"at the threshold", pcmOf(1000, -1000, 1000, -1000), true},
		{"just under", pcmOf(999, -999, 999, -999), false},
		{"loudest", pcmOf(math.MinInt16, math.MaxInt16), true},
		{"sine of RMS 1061", sine(1500), true},
		{"sine of RMS 990", sine(1400), false},
		{"trailing odd byte ignored", append(pcmOf(1000, 1000), 0), true},
	} {
		if got := Loud(c.pcm); got != c.want {
			t.Errorf("%s: Loud = %v, want %v", c.name, got, c.want)
		}
	}
}

// loudBySample is Loud as the RMS is defined, one sample at a time over
// the whole frame: what Loud's blocks and early stop must agree with.
func loudBySample(pcm []byte) bool {
	n := len(pcm) / 2
	if n == 0 {
		return false
	}
	var sum uint64
	for i := 0; i < 2*n; i += 2 {
		v := int64(int16(binary.LittleEndian.Uint16(pcm[i:])))
		sum += uint64(v * v)
	}
	return sum >= SpeechRMS*SpeechRMS*uint64(n)
}

// Loud decides every frame as the whole frame's RMS does, whatever its
// length (whole blocks, a tail, an odd byte) and wherever its loudness
// lies: speech at the start (decided early), at the very end, spread just
// over or just under the threshold, the extremes of int16.
func TestLoudAgreesWithTheWholeFramesRMS(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 640))
	frame := func(n int, amp func(i int) int16) []byte {
		s := make([]int16, n)
		for i := range s {
			s[i] = amp(i)
		}
		return pcmOf(s...)
	}
	var frames [][]byte
	for _, n := range []int{1, 3, 4, 31, 32, 33, 63, 64, 65, 160, 320, 321, 960} {
		for _, level := range []int{0, 500, 990, 999, 1000, 1001, 1010, 1500, 32767} {
			lv := level
			frames = append(frames,
				frame(n, func(int) int16 { return int16(lv) }),
				frame(n, func(i int) int16 { return int16((1 - 2*(i%2)) * lv) }),
				frame(n, func(int) int16 { return int16(rng.IntN(2*lv+1) - lv) }),
				// all the frame's energy in its last sample, or its first
				frame(n, func(i int) int16 {
					if i == n-1 {
						return int16(min(32767, lv*int(math.Sqrt(float64(n)))))
					}
					return 0
				}),
				frame(n, func(i int) int16 {
					if i == 0 {
						return math.MinInt16
					}
					return int16(lv / 4)
				}))
		}
	}
	for range 2000 {
		frames = append(frames, frame(1+rng.IntN(700), func(int) int16 { return int16(rng.IntN(65536) - 32768) }),
			frame(1+rng.IntN(700), func(int) int16 { return int16(rng.IntN(2001) - 1000) }))
	}
	for i, f := range frames {
		for _, pcm := range [][]byte{f, append(f[:len(f):len(f)], 0x7f)} { // and with an odd byte after
			if got, want := Loud(pcm), loudBySample(pcm); got != want {
				t.Fatalf("frame %d (%d bytes): Loud = %v, the whole frame's RMS says %v", i, len(pcm), got, want)
			}
		}
	}
}

// BenchmarkLoud20ms is a silent frame (every sample summed); the Speech
// one a 440 Hz sine at about -12 dBFS (relaybench's), decided loud early.
func BenchmarkLoud20ms(b *testing.B) {
	benchLoud(b, make([]byte, 640))
}

func BenchmarkLoud20msSpeech(b *testing.B) {
	s := make([]int16, 320)
	for i := range s {
		s[i] = int16(8000 * math.Sin(2*math.Pi*440*float64(i)/16000))
	}
	benchLoud(b, pcmOf(s...))
}

func benchLoud(b *testing.B, pcm []byte) {
	b.SetBytes(int64(len(pcm)))
	b.ReportAllocs()
	for b.Loop() {
		Loud(pcm)
	}
}
