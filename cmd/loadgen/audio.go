package main

import (
	"time"

	"github.com/turnstile-gw/turnstile/internal/speechlike"
)

// The microphone side: PCM16LE mono at 16 kHz in 40 ms frames, as the web
// client sends it.
const (
	inputRate    = 16000
	frameDur     = 40 * time.Millisecond
	frameSamples = inputRate * int(frameDur/time.Millisecond) / 1000 // 640
	frameBytes   = 2 * frameSamples                                  // 1280
)

// framesIn is how many whole frames d lasts, rounded to the nearest frame
// and at least one.
func framesIn(d time.Duration) int {
	return max(1, int((d+frameDur/2)/frameDur))
}

// schedule is one session's loop of speech then silence, counted in frames
// from the first frame of the stream (frame 0 starts a speech).
type schedule struct {
	speech, silence int
}

func newSchedule(speech, silence time.Duration) schedule {
	return schedule{speech: framesIn(speech), silence: framesIn(silence)}
}

func (s schedule) cycle() int { return s.speech + s.silence }

// speechFrame reports whether frame i is speech and, if so, which frame of
// the speech it is.
func (s schedule) speechFrame(i int) (int, bool) {
	pos := i % s.cycle()
	return pos, pos < s.speech
}

// speechStart reports whether frame i is the first of a speech.
func (s schedule) speechStart(i int) bool { return i%s.cycle() == 0 }

// speechEnd reports whether frame i is the first silence after a speech:
// the moment a round trip's latency is measured from.
func (s schedule) speechEnd(i int) bool { return i%s.cycle() == s.speech }

// dueFrames is how many frames a stream started at start should have sent
// by now: one at start, then one per frame duration. Sending by this count
// rather than by ticks keeps the pace real-time even after a late tick.
func dueFrames(start, now time.Time) int {
	if now.Before(start) {
		return 0
	}
	return int(now.Sub(start)/frameDur) + 1
}

// dueAt is when frame i of a stream started at start is due.
func dueAt(start time.Time, i int) time.Time { return start.Add(time.Duration(i) * frameDur) }

// startOffset is when session i of n starts, the starts spread evenly over
// ramp from 0.
func startOffset(i, n int, ramp time.Duration) time.Duration {
	if n <= 0 {
		return 0
	}
	return time.Duration(int64(ramp) * int64(i) / int64(n))
}

// speechPCM renders frames frames of speech-like PCM16LE at 16 kHz. All
// sessions share one rendering: it is read, never written.
func speechPCM(frames int) []byte { return speechlike.Render(inputRate, frames*frameSamples) }
