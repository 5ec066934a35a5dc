// Package speechlike renders a sound that a voice-activity detector takes
// for speech, for clients that have no microphone: cmd/loadgen's load and
// the demo utterance of `gateway call`. It is a 150 Hz voice with two
// harmonics and a slow pitch wobble, its loudness swinging between 40 %
// and 100 % four times a second like syllables. Every 10 ms of it is far
// above an energy detector's speech threshold (-30 dBFS): its quietest
// stretch is about -21 dBFS.
package speechlike

import (
	"encoding/binary"
	"math"
)

const (
	voiceF0      = 150.0
	voicePeak    = 0.5 * math.MaxInt16
	syllableRate = 4.0 // per second
	wobbleRate   = 3.0 // pitch wobble, per second
	wobbleDepth  = 10.0
)

// Render returns n samples of the sound as PCM16LE mono at rate (Hz).
func Render(rate float64, n int) []byte {
	pcm := make([]byte, 0, 2*n)
	phase := 0.0
	for i := range n {
		t := float64(i) / rate
		f := voiceF0 + wobbleDepth*math.Sin(2*math.Pi*wobbleRate*t)
		phase += 2 * math.Pi * f / rate
		voice := (math.Sin(phase) + 0.5*math.Sin(2*phase) + 0.25*math.Sin(3*phase)) / 1.75
		env := 0.7 + 0.3*math.Sin(2*math.Pi*syllableRate*t)
		v := int16(math.Round(voicePeak * env * voice))
		pcm = binary.LittleEndian.AppendUint16(pcm, uint16(v))
	}
	return pcm
}
