package audio

import "encoding/binary"

// SpeechRMS is the loudness, as the RMS of PCM16 samples on the int16
// scale (about -30 dBFS), from which audio counts as speech: the energy
// check the gateway times the end of the user's speech by and the offline
// demo model hears speech by.
const SpeechRMS = 1000

// Loud reports whether the PCM16LE samples in pcm (a trailing odd byte is
// ignored) have an RMS of at least SpeechRMS. It allocates nothing and
// costs one multiply-add per sample, in integers: the microphone path calls
// it on every frame.
func Loud(pcm []byte) bool {
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
