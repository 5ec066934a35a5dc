package audio

import "encoding/binary"

// SpeechRMS is the loudness, as the RMS of PCM16 samples on the int16
// scale (about -30 dBFS), from which audio counts as speech: the energy
// check the gateway times the end of the user's speech by and the offline
// demo model hears speech by.
const SpeechRMS = 1000

// loudBlock is how many bytes (32 samples) Loud sums between its looks at
// whether the frame is already loud enough.
const loudBlock = 64

// Loud reports whether the PCM16LE samples in pcm (a trailing odd byte is
// ignored) have an RMS of at least SpeechRMS. It allocates nothing and
// costs one multiply-add per sample, in integers: the microphone path calls
// it on every frame. The sum of squares only grows, so it stops as soon as
// the sum reaches the frame's threshold (a frame with speech in it is
// usually decided within its first block of 32 samples); the decision is
// the whole frame's all the same. Samples are read four at a time.
func Loud(pcm []byte) bool {
	n := len(pcm) / 2
	if n == 0 {
		return false
	}
	need := SpeechRMS * SpeechRMS * uint64(n)
	var sum uint64
	p := pcm[:2*n]
	for len(p) >= loudBlock {
		b := p[:loudBlock]
		for i := 0; i < loudBlock; i += 8 {
			w := binary.LittleEndian.Uint64(b[i:])
			s0, s1 := int64(int16(w)), int64(int16(w>>16))
			s2, s3 := int64(int16(w>>32)), int64(int16(w>>48))
			sum += uint64(s0*s0 + s1*s1 + s2*s2 + s3*s3)
		}
		if sum >= need {
			return true
		}
		p = p[loudBlock:]
	}
	for ; len(p) >= 2; p = p[2:] {
		v := int64(int16(binary.LittleEndian.Uint16(p)))
		sum += uint64(v * v)
	}
	return sum >= need
}
