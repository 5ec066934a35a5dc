package audio

import (
	"encoding/binary"
	"math/bits"
)

// The G.711 μ-law constants: the bias added before segment coding and the
// largest magnitude coded without clipping.
const (
	mulawBias = 0x84
	mulawClip = 32635
)

// mulawTable is DecodeMulaw for every code, computed once from G.711's
// decoding formula. It is read, never written.
var mulawTable = func() (t [256]int16) {
	for c := range t {
		u := ^byte(c)
		mag := (int32(u&0x0F)<<3 + mulawBias) << ((u & 0x70) >> 4)
		if u&0x80 != 0 {
			t[c] = int16(mulawBias - mag)
		} else {
			t[c] = int16(mag - mulawBias)
		}
	}
	return t
}()

// DecodeMulaw is the linear PCM16 value of a μ-law code.
func DecodeMulaw(code byte) int16 { return mulawTable[code] }

// EncodeMulaw is the μ-law code of a PCM16 sample (G.711 segment coding;
// magnitudes above 32635 clip).
func EncodeMulaw(s int16) byte {
	x := int32(s)
	sign := byte(0)
	if x < 0 {
		x = -x
		sign = 0x80
	}
	x = min(x, mulawClip) + mulawBias
	// The segment is the position of x's highest set bit above bit 7: x is
	// at least 0x84, so x>>7 is between 1 and 255.
	exp := bits.Len32(uint32(x)>>7) - 1
	mant := byte(x>>(exp+3)) & 0x0F
	return ^(sign | byte(exp)<<4 | mant)
}

// AppendMulaw appends the μ-law codes of pcm (PCM16LE, an even number of
// bytes; a trailing odd byte is ignored) to dst, at the same rate.
func AppendMulaw(dst, pcm []byte) []byte {
	for i := 0; i+1 < len(pcm); i += 2 {
		dst = append(dst, EncodeMulaw(int16(binary.LittleEndian.Uint16(pcm[i:]))))
	}
	return dst
}

// AppendPCM appends the PCM16LE samples of the μ-law codes to dst, at the
// same rate: 2 bytes for each code.
func AppendPCM(dst, mulaw []byte) []byte {
	for _, c := range mulaw {
		dst = binary.LittleEndian.AppendUint16(dst, uint16(mulawTable[c]))
	}
	return dst
}
