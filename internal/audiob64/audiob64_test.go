package audiob64

import (
	"bytes"
	stdbase64 "encoding/base64"
	"math/rand/v2"
	"testing"
)

// agree fails t unless Decode and encoding/base64's StdEncoding.Decode
// agree on src: both fail, or both succeed with the same bytes.
func agree(t *testing.T, src []byte) {
	t.Helper()
	want := make([]byte, stdbase64.StdEncoding.DecodedLen(len(src)))
	wn, werr := stdbase64.StdEncoding.Decode(want, src)
	got := make([]byte, DecodedLen(len(src)))
	gn, gerr := Decode(got, src)
	switch {
	case (werr == nil) != (gerr == nil):
		t.Fatalf("Decode(%q) = %v, encoding/base64 says %v", src, gerr, werr)
	case werr == nil && !bytes.Equal(got[:gn], want[:wn]):
		t.Fatalf("Decode(%q) = %x, encoding/base64 says %x", src, got[:gn], want[:wn])
	}
}

// corrupt are bytes that are not base64 or not where they are put: JSON's
// quote and escape, padding, the URL alphabet's two, controls, non-ASCII,
// and CR and LF (which both skip).
var corrupt = []byte{'\\', '"', '=', '-', '_', ' ', '\t', '\r', '\n', 0x00, 0x7f, 0x80, 0xff, '.', ':', '@', '[', '`', '{'}

// TestAgreesWithEncodingBase64 covers every chunk length up to 2048 bytes
// (the SIMD loops' starts and ends, the scalar tails, both paddings), each
// valid and with a corrupt byte at the start, inside the first and the
// last SIMD block and in the padding (each byte of corrupt in turn),
// truncated, over-padded and with a newline inside.
func TestAgreesWithEncodingBase64(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	prefix := []byte(`{"data":"`)
	for n := 0; n <= 2048; n++ {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		want := stdbase64.StdEncoding.AppendEncode(bytes.Clone(prefix), src)
		got := AppendEncode(bytes.Clone(prefix), src)
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendEncode of %d bytes = %q, want %q", n, got, want)
		}
		enc := want[len(prefix):]
		agree(t, enc)

		if len(enc) == 0 {
			continue
		}
		positions := []int{0, 1, len(enc) / 2, len(enc) - 1, rng.IntN(len(enc)), 31, 32, 44, 45, len(enc) - 13, len(enc) - 3}
		bad := bytes.Clone(enc)
		for _, p := range positions {
			if p < 0 || p >= len(enc) {
				continue
			}
			for k := range 4 { // four of corrupt at each place, in turn
				bad[p] = corrupt[(n+p+k*5)%len(corrupt)]
				agree(t, bad)
			}
			bad[p] = enc[p]
		}
		for cut := 1; cut <= 3 && cut <= len(enc); cut++ {
			agree(t, enc[:len(enc)-cut])
		}
		agree(t, append(bytes.Clone(enc), '='))
		agree(t, append(bytes.Clone(enc), "AAAA"...))
		agree(t, bytes.TrimRight(enc, "="))
		// An escaped newline as JSON carries it, and a raw one.
		mid := len(enc) / 2
		agree(t, append(append(bytes.Clone(enc[:mid]), `\n`...), enc[mid:]...))
		agree(t, append(append(bytes.Clone(enc[:mid]), "\r\n"...), enc[mid:]...))
	}
}

// TestAgreesOnEveryByteInsideASIMDBlock puts each of the 256 byte values
// at places the vector loop reads (its first block, its last, a block
// boundary) of a 1280-character chunk, the length of 20 ms of model
// audio.
func TestAgreesOnEveryByteInsideASIMDBlock(t *testing.T) {
	enc := []byte(stdbase64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xfb, 0xef, 0xbe, 0x00, 0x10, 0x83}, 160)))
	for _, p := range []int{0, 7, 31, 32, 33, 600, 1214, 1215, 1247, 1248, 1278, 1279} {
		for c := range 256 {
			bad := bytes.Clone(enc)
			bad[p] = byte(c)
			agree(t, bad)
		}
	}
}

// TestNonZeroTrailingBitsAreAcceptedAsByEncodingBase64: StdEncoding is not
// strict; neither is Decode.
func TestNonZeroTrailingBitsAreAcceptedAsByEncodingBase64(t *testing.T) {
	long := stdbase64.StdEncoding.EncodeToString(make([]byte, 63))
	for _, s := range []string{"AB==", "ABC=", long + "AB==", long + "ABC="} {
		agree(t, []byte(s))
	}
}

func TestAppendEncodeAllocatesNothingWithRoom(t *testing.T) {
	pcm := make([]byte, 640)
	buf := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(100, func() { buf = AppendEncode(buf[:0], pcm) }); n != 0 {
		t.Errorf("AppendEncode into a buffer with room: %v allocations, want 0", n)
	}
}

// FuzzDecodeAgreesWithEncodingBase64 runs its seeds in every test run;
// `go test -fuzz FuzzDecode ./internal/audiob64/` searches further.
func FuzzDecodeAgreesWithEncodingBase64(f *testing.F) {
	f.Add([]byte(stdbase64.StdEncoding.EncodeToString(make([]byte, 960))))
	f.Add([]byte(stdbase64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xff}, 47))))
	f.Add([]byte("AAAA\\nAAAA"))
	f.Fuzz(func(t *testing.T, src []byte) {
		agree(t, src)
		if got, want := AppendEncode(nil, src), stdbase64.StdEncoding.AppendEncode(nil, src); !bytes.Equal(got, want) {
			t.Fatalf("AppendEncode(%x) = %q, want %q", src, got, want)
		}
	})
}

// The two calls of a voice session's hot path: a 20 ms microphone chunk
// (640 bytes at 16 kHz) encoded, a 20 ms model chunk (960 bytes at
// 24 kHz, 1280 characters) decoded; encoding/base64 beside them.
func BenchmarkEncodeMicChunk(b *testing.B) {
	pcm := make([]byte, 640)
	buf := make([]byte, 0, 1024)
	b.Run("audiob64", func(b *testing.B) {
		b.SetBytes(int64(len(pcm)))
		b.ReportAllocs()
		for b.Loop() {
			buf = AppendEncode(buf[:0], pcm)
		}
	})
	b.Run("encoding-base64", func(b *testing.B) {
		b.SetBytes(int64(len(pcm)))
		b.ReportAllocs()
		for b.Loop() {
			buf = stdbase64.StdEncoding.AppendEncode(buf[:0], pcm)
		}
	})
}

func BenchmarkDecodeModelChunk(b *testing.B) {
	src := []byte(stdbase64.StdEncoding.EncodeToString(make([]byte, 960)))
	dst := make([]byte, DecodedLen(len(src)))
	b.Run("audiob64", func(b *testing.B) {
		b.SetBytes(960)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Decode(dst, src); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-base64", func(b *testing.B) {
		b.SetBytes(960)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := stdbase64.StdEncoding.Decode(dst, src); err != nil {
				b.Fatal(err)
			}
		}
	})
}
