package audio

import (
	"encoding/binary"
	"fmt"
)

// Sample rates on each side of a call.
const (
	// CarrierRate is the telephone network's: G.711 μ-law, mono.
	CarrierRate = 8000
	// InputRate is what Gemini Live takes (PCM16LE mono).
	InputRate = 16000
	// OutputRate is what Gemini Live answers with (PCM16LE mono).
	OutputRate = 24000
	// MulawFrame is the bytes of 20 ms of μ-law at CarrierRate, the frame
	// Twilio and most carriers send.
	MulawFrame = CarrierRate / 50
)

// The two filters, designed once and shared by every call: they are read,
// never written.
var (
	// 8 → 16 kHz: the gain of 2 makes up for the zero between every two
	// up-sampled inputs.
	inboundFilter = newPolyphase(lowpass(InputRate, 3400, 4600, 2, 2), 2, 1)
	// 24 → 8 kHz: what lies between 4 and 4.4 kHz folds to 3.6–4 kHz,
	// above the telephone band (G.712 asks only 14 dB at 4 kHz and 32 dB
	// from 4.6 kHz); a stop band from 4 kHz would cost 60 % more taps.
	outboundFilter = newPolyphase(lowpass(OutputRate, 3400, 4400, 1, 1), 1, 3)
)

// Inbound converts a caller's audio for the model: μ-law at 8 kHz to
// PCM16LE mono at 16 kHz. It keeps filter state between calls; one
// goroutine at a time.
type Inbound struct {
	r resampler
}

// NewInbound returns a converter for one stream, starting from silence.
func NewInbound() *Inbound { return &Inbound{r: newResampler(inboundFilter)} }

// InboundLen is the bytes Inbound.Convert appends for n μ-law bytes.
func InboundLen(n int) int { return 4 * n }

// Convert appends the PCM16LE 16 kHz conversion of mulaw to dst and returns
// the extended slice. It allocates only when dst lacks InboundLen(len(mulaw))
// bytes of spare capacity.
func (c *Inbound) Convert(dst, mulaw []byte) []byte {
	for _, code := range mulaw {
		c.r.push(float32(mulawTable[code]))
		for {
			y, ok := c.r.next()
			if !ok {
				break
			}
			dst = binary.LittleEndian.AppendUint16(dst, uint16(toInt16(y)))
		}
	}
	return dst
}

// Reset forgets the stream, as if new.
func (c *Inbound) Reset() { c.r.reset() }

// Outbound converts the model's audio for the caller: PCM16LE mono at
// 24 kHz to μ-law at 8 kHz. It keeps filter state (and an odd trailing
// byte) between calls; one goroutine at a time.
type Outbound struct {
	r       resampler
	carry   byte // the first byte of a sample split across two chunks
	carried bool
}

// NewOutbound returns a converter for one stream, starting from silence.
func NewOutbound() *Outbound { return &Outbound{r: newResampler(outboundFilter)} }

// maxSourceRate bounds NewOutboundFrom: beyond it the filter grows large
// for no audible gain.
const maxSourceRate = 192000

// NewOutboundFrom returns a converter to μ-law 8 kHz from PCM16LE mono at
// another rate above 8 kHz (a WAV file's 16, 44.1 or 48 kHz), with the same
// anti-aliasing as NewOutbound. Its filter is designed for the rate on the
// spot (a millisecond or so, a few hundred kilobytes for 44.1 kHz): for
// files and tools, not for each call.
func NewOutboundFrom(rate int) (*Outbound, error) {
	if rate == OutputRate {
		return NewOutbound(), nil
	}
	if rate <= CarrierRate || rate > maxSourceRate {
		return nil, fmt.Errorf("audio: cannot convert from %d Hz: the rate must be above %d and at most %d Hz",
			rate, CarrierRate, maxSourceRate)
	}
	g := gcd(rate, CarrierRate)
	up, down := CarrierRate/g, rate/g
	h := lowpass(float64(rate*up), 3400, 4000, float64(up), up)
	return &Outbound{r: newResampler(newPolyphase(h, up, down))}, nil
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// OutboundMaxLen bounds the bytes Outbound.Convert appends for n bytes of
// 24 kHz PCM: a third of the samples, plus one for a split sample and one
// for where the decimation phase stands.
func OutboundMaxLen(n int) int { return (n/2+1)/3 + 1 }

// Convert appends the μ-law 8 kHz conversion of pcm (PCM16LE 24 kHz, any
// byte count: a split sample is completed by the next call) to dst and
// returns the extended slice. It allocates only when dst lacks
// OutboundMaxLen(len(pcm)) bytes of spare capacity.
func (c *Outbound) Convert(dst, pcm []byte) []byte {
	if len(pcm) == 0 {
		return dst
	}
	if c.carried {
		c.carried = false
		dst = c.sample(dst, int16(uint16(c.carry)|uint16(pcm[0])<<8))
		pcm = pcm[1:]
	}
	for len(pcm) >= 2 {
		dst = c.sample(dst, int16(binary.LittleEndian.Uint16(pcm)))
		pcm = pcm[2:]
	}
	if len(pcm) == 1 {
		c.carry, c.carried = pcm[0], true
	}
	return dst
}

func (c *Outbound) sample(dst []byte, s int16) []byte {
	c.r.push(float32(s))
	if y, ok := c.r.next(); ok {
		dst = append(dst, EncodeMulaw(toInt16(y)))
	}
	return dst
}

// Reset forgets the stream, as if new: after a barge-in, the next answer
// starts clean rather than with the tail of the interrupted one.
func (c *Outbound) Reset() {
	c.r.reset()
	c.carried = false
}

// toInt16 rounds a filtered sample to PCM16, saturating: a filter's ripple
// can overshoot full scale.
func toInt16(y float32) int16 {
	switch {
	case y >= 32767:
		return 32767
	case y <= -32768:
		return -32768
	case y >= 0:
		return int16(y + 0.5)
	default:
		return int16(y - 0.5)
	}
}
