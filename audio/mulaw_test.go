package audio

import (
	"bytes"
	"testing"
)

// G.711's fixed points: 0xFF (and 0x7F) are silence, 0x80 and 0x00 the
// loudest positive and negative values, and the biased segment coding puts
// segment 0 steps by 8 up to 120, segment 1 starts at 132.
func TestMulawMatchesG711ReferenceValues(t *testing.T) {
	decodes := map[byte]int16{0xFF: 0, 0x7F: 0, 0x80: 32124, 0x00: -32124, 0xFE: 8, 0xF2: 104, 0x72: -104, 0xF0: 120, 0xEF: 132}
	for code, want := range decodes {
		if got := DecodeMulaw(code); got != want {
			t.Errorf("DecodeMulaw(%#02x) = %d, want %d", code, got, want)
		}
	}
	encodes := map[int16]byte{0: 0xFF, 32767: 0x80, -32768: 0x00, 100: 0xF2, -100: 0x72, 32124: 0x80}
	for s, want := range encodes {
		if got := EncodeMulaw(s); got != want {
			t.Errorf("EncodeMulaw(%d) = %#02x, want %#02x", s, got, want)
		}
	}
}

// Every code is a fixed point of decode-then-encode (but negative zero,
// which G.711 encodes as positive zero), and encoding is monotonic over
// the whole PCM16 range: a louder sample never gets a quieter code.
func TestMulawRoundTripsEveryCodeAndIsMonotonic(t *testing.T) {
	for c := range 256 {
		code := byte(c)
		want := code
		if code == 0x7F {
			want = 0xFF
		}
		if got := EncodeMulaw(DecodeMulaw(code)); got != want {
			t.Errorf("EncodeMulaw(DecodeMulaw(%#02x)) = %#02x, want %#02x", code, got, want)
		}
	}
	prev := DecodeMulaw(EncodeMulaw(-32768))
	for s := -32767; s <= 32767; s++ {
		v := DecodeMulaw(EncodeMulaw(int16(s)))
		if v < prev {
			t.Fatalf("sample %d decodes to %d, below %d for the sample before", s, v, prev)
		}
		prev = v
	}
}

func TestAppendMulawAndPCMAreInverseOnCodes(t *testing.T) {
	codes := make([]byte, 256)
	for i := range codes {
		codes[i] = byte(i)
	}
	codes[0x7F] = 0xFF // negative zero comes back as zero
	pcm := AppendPCM(nil, codes)
	if len(pcm) != 512 {
		t.Fatalf("AppendPCM of 256 codes made %d bytes, want 512", len(pcm))
	}
	if back := AppendMulaw(nil, pcm); !bytes.Equal(back, codes) {
		t.Errorf("AppendMulaw(AppendPCM(codes)) differs from codes")
	}
	if got := AppendMulaw(nil, []byte{1, 2, 3}); len(got) != 1 {
		t.Errorf("AppendMulaw of 3 bytes made %d codes, want 1 (the odd byte ignored)", len(got))
	}
}
