package fakegemini

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/turnstile-gw/turnstile/fake/fakeserve"
)

// The demo model "speaks" short sine melodies: PCM16LE mono at the rate
// Live sends (24 kHz), streamed in 40 ms chunks.
const (
	liveOutRate   = 24000
	liveChunk     = 40 * time.Millisecond
	demoNote      = 320 * time.Millisecond
	demoAmplitude = 0.3 * math.MaxInt16
	demoFade      = 15 * time.Millisecond // per note, against clicks
)

// Note frequencies in Hz.
var (
	// answerMelody rises through a C major triad: a reply.
	answerMelody = []float64{523.25, 659.25, 783.99}
	// sorryMelody falls a minor third: something went wrong.
	sorryMelody = []float64{659.25, 523.25}
)

// melodyDuration is how long melody m sounds.
func melodyDuration(m []float64) time.Duration { return time.Duration(len(m)) * demoNote }

// synthMelody renders notes of demoNote each, with a short fade in and out
// of every note.
func synthMelody(notes []float64) []byte {
	perNote := int(int64(liveOutRate) * int64(demoNote) / int64(time.Second))
	fade := int(int64(liveOutRate) * int64(demoFade) / int64(time.Second))
	pcm := make([]byte, 0, 2*perNote*len(notes))
	for _, f := range notes {
		for i := range perNote {
			gain := 1.0
			if i < fade {
				gain = float64(i) / float64(fade)
			} else if left := perNote - 1 - i; left < fade {
				gain = float64(left) / float64(fade)
			}
			v := demoAmplitude * gain * math.Sin(2*math.Pi*f*float64(i)/liveOutRate)
			pcm = binary.LittleEndian.AppendUint16(pcm, uint16(int16(math.Round(v))))
		}
	}
	return pcm
}

// chunkPCM cuts pcm into pieces of d of 24 kHz audio (the last may be
// shorter).
func chunkPCM(pcm []byte, d time.Duration) [][]byte {
	size := 2 * int(int64(liveOutRate)*int64(d)/int64(time.Second))
	var out [][]byte
	for len(pcm) > 0 {
		n := min(size, len(pcm))
		out = append(out, pcm[:n])
		pcm = pcm[n:]
	}
	return out
}

// spreadText cuts a transcript into at most four pieces spread over n audio
// chunks, as the service sends transcripts alongside its audio: the piece
// for chunk i, or "".
func spreadText(text string, n int) []string {
	out := make([]string, n)
	if text == "" || n == 0 {
		return out
	}
	pieces := fakeserve.SplitText(text, min(n, 4))
	for i, p := range pieces {
		out[i*n/len(pieces)] = p
	}
	return out
}
