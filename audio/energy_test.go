package audio

import (
	"encoding/binary"
	"math"
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

func BenchmarkLoud20ms(b *testing.B) {
	pcm := make([]byte, 640)
	b.SetBytes(int64(len(pcm)))
	b.ReportAllocs()
	for b.Loop() {
		Loud(pcm)
	}
}
