package main

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/turnstile-gw/turnstile/audio"
)

// A call's chunks carry no header: a header cannot survive the gateway's
// μ-law decoding and resampling. They are told apart by sound instead:
// chunk seq is a tone at callTones[(seq-1) mod len(callTones)], all within
// the telephone band. With -client twilio the echo upstream answers every
// chunk with its own audio (at 24 kHz), so every 160 μ-law bytes a call
// receives are the tone of the chunk they answer, delayed by the gateway's
// filters (about 5 ms). Answers arrive in order (TCP), so the tone names
// the chunk: the next one after the last answered with that tone. A gap of
// fewer than len(callTones) chunks the gateway dropped is recognised; the
// chunks in it count as lost.
var callTones = [...]float64{500, 900, 1300, 1700, 2100, 2500, 2900, 3300}

// callToneAmp is the tones' peak, of full scale.
const callToneAmp = 0.3

// callChunks renders one 20 ms μ-law chunk per tone.
func callChunks() [][]byte {
	chunks := make([][]byte, len(callTones))
	for k, f := range callTones {
		pcm := make([]byte, 0, 2*audio.MulawFrame)
		for i := range audio.MulawFrame {
			v := callToneAmp * math.MaxInt16 * math.Sin(2*math.Pi*f*float64(i)/audio.CarrierRate)
			pcm = binary.LittleEndian.AppendUint16(pcm, uint16(int16(math.Round(v))))
		}
		chunks[k] = audio.AppendMulaw(nil, pcm)
	}
	return chunks
}

// toneOf is the index of the tone loudest in one answer block of μ-law
// (Goertzel's algorithm at each tone), or -1 for a block with no tone
// louder than 5 % of a chunk's.
func toneOf(block []byte) int {
	best, bestPow := -1, 0.0
	n := float64(len(block))
	for k, f := range callTones {
		coeff := 2 * math.Cos(2*math.Pi*f/audio.CarrierRate)
		var s1, s2 float64
		for _, c := range block {
			s1, s2 = float64(audio.DecodeMulaw(c))+coeff*s1-s2, s1
		}
		pow := s1*s1 + s2*s2 - coeff*s1*s2
		if pow > bestPow {
			best, bestPow = k, pow
		}
	}
	// A full tone of amplitude A over n samples has power (A·n/2)².
	floor := 0.05 * callToneAmp * math.MaxInt16 * n / 2
	if bestPow < floor*floor {
		return -1
	}
	return best
}

// onMulaw takes n bytes of a call's answer audio: every completed block of
// MulawFrame bytes answers the chunk its tone names. The arrival is kept in
// rtt (as a stamp + 1) until result subtracts the send time: the sender
// owns sentAt.
func (p *relayProbe) onMulaw(mulaw []byte, now time.Time) {
	for len(mulaw) > 0 {
		take := min(audio.MulawFrame-len(p.block), len(mulaw))
		p.block = append(p.block, mulaw[:take]...)
		mulaw = mulaw[take:]
		if len(p.block) < audio.MulawFrame {
			return
		}
		p.answerBlock(toneOf(p.block), now)
		p.block = p.block[:0]
	}
}

func (p *relayProbe) answerBlock(tone int, now time.Time) {
	if tone < 0 {
		p.unmatched++
		return
	}
	// The next chunk after the last answered whose tone this is.
	seq := p.lastSeq + 1
	for int(seq-1)%len(callTones) != tone {
		seq++
	}
	if seq > p.sent.Load() {
		p.unmatched++
		return
	}
	for len(p.rtt) < int(seq) {
		p.rtt = append(p.rtt, make([]uint32, 1024)...)
	}
	p.rtt[seq-1] = p.plan.us(now) + 1
	p.lastSeq = seq
	p.answered.Add(1)
}
