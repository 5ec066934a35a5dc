// Package audiob64 is the standard base64 (RFC 4648, padded) of the audio
// chunks a voice session sends and receives dozens of times a second,
// with SIMD where the CPU has it: github.com/segmentio/asm's AVX2 code on
// amd64 (its NEON code on arm64), encoding/base64 for what is left of a
// chunk and on every other CPU. Encoding and decoding agree with
// encoding/base64's StdEncoding byte for byte, and Decode fails on every
// input that StdEncoding.Decode fails on (the equivalence test); only the
// offset in the error may differ. Cold paths (keys, ids, signatures) keep
// encoding/base64.
package audiob64

import (
	"slices"

	"github.com/segmentio/asm/base64"
)

// AppendEncode appends the base64 of src to dst and returns the extended
// slice, as encoding/base64's StdEncoding.AppendEncode: no allocation when
// dst has room.
func AppendEncode(dst, src []byte) []byte {
	n := base64.StdEncoding.EncodedLen(len(src))
	dst = slices.Grow(dst, n)
	base64.StdEncoding.Encode(dst[len(dst):len(dst)+n], src)
	return dst[:len(dst)+n]
}

// DecodedLen is the most bytes Decode writes for n bytes of base64.
func DecodedLen(n int) int { return base64.StdEncoding.DecodedLen(n) }

// Decode decodes src into dst, which must hold DecodedLen(len(src)) bytes,
// and returns the bytes written. Bytes of dst past those may be
// overwritten. Like encoding/base64, it skips CR and LF; anything else
// outside the alphabet, misplaced padding or a length that is not a
// multiple of four is an error.
func Decode(dst, src []byte) (int, error) { return base64.StdEncoding.Decode(dst, src) }
