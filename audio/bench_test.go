package audio

import "testing"

// One 20 ms frame each way, the unit a call converts 50 times a second.
func BenchmarkInbound20ms(b *testing.B) {
	mulaw := AppendMulaw(nil, tone(1000, CarrierRate, 0.5, MulawFrame))
	in := NewInbound()
	dst := make([]byte, 0, InboundLen(len(mulaw)))
	b.SetBytes(int64(len(mulaw)))
	b.ReportAllocs()
	for b.Loop() {
		dst = in.Convert(dst[:0], mulaw)
	}
}

func BenchmarkOutbound20ms(b *testing.B) {
	pcm := tone(1000, OutputRate, 0.5, 3*MulawFrame)
	out := NewOutbound()
	dst := make([]byte, 0, OutboundMaxLen(len(pcm)))
	b.SetBytes(int64(len(pcm)))
	b.ReportAllocs()
	for b.Loop() {
		dst = out.Convert(dst[:0], pcm)
	}
}
