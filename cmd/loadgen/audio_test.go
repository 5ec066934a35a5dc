package main

import (
	"encoding/binary"
	"math"
	"testing"
	"time"
)

func TestFrameIsFortyMillisecondsOfSixteenKilohertz(t *testing.T) {
	if frameSamples != 640 || frameBytes != 1280 {
		t.Fatalf("frame = %d samples, %d bytes; want 640 samples, 1280 bytes", frameSamples, frameBytes)
	}
	if got := time.Duration(frameSamples) * time.Second / inputRate; got != frameDur {
		t.Fatalf("a frame lasts %v of audio, but frames are sent every %v", got, frameDur)
	}
}

func TestFramesInRoundsToWholeFrames(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{
		{1200 * time.Millisecond, 30},
		{2 * time.Second, 50},
		{40 * time.Millisecond, 1},
		{59 * time.Millisecond, 1},
		{61 * time.Millisecond, 2},
		{10 * time.Millisecond, 1},
		{0, 1},
	} {
		if got := framesIn(tc.d); got != tc.want {
			t.Errorf("framesIn(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

func TestScheduleLoopsSpeechThenSilence(t *testing.T) {
	s := newSchedule(1200*time.Millisecond, 2*time.Second) // 30 + 50 frames
	for i := range 3 * s.cycle() {
		pos := i % 80
		k, speech := s.speechFrame(i)
		if speech != (pos < 30) || (speech && k != pos) {
			t.Fatalf("frame %d: speechFrame = %d, %v; want speech frame %d: %v", i, k, speech, pos, pos < 30)
		}
		if got := s.speechStart(i); got != (pos == 0) {
			t.Fatalf("frame %d: speechStart = %v", i, got)
		}
		// The latency clock starts at the first silent frame after speech.
		if got := s.speechEnd(i); got != (pos == 30) {
			t.Fatalf("frame %d: speechEnd = %v", i, got)
		}
	}
}

func TestDueFramesKeepsRealTimePace(t *testing.T) {
	start := time.Unix(1000, 0)
	for _, tc := range []struct {
		after time.Duration
		want  int
	}{
		{-time.Millisecond, 0},
		{0, 1},
		{39 * time.Millisecond, 1},
		{40 * time.Millisecond, 2},
		{time.Second, 26},
		{time.Minute, 1501},
	} {
		if got := dueFrames(start, start.Add(tc.after)); got != tc.want {
			t.Errorf("dueFrames after %v = %d, want %d", tc.after, got, tc.want)
		}
	}
	// 25 frames a second: 16 000 samples, a second of audio per second.
	if got := dueAt(start, 25).Sub(start); got != time.Second {
		t.Errorf("frame 25 is due after %v, want 1s", got)
	}
}

func TestStartOffsetsSpreadEvenlyOverRamp(t *testing.T) {
	ramp := 10 * time.Second
	want := []time.Duration{0, 2500 * time.Millisecond, 5 * time.Second, 7500 * time.Millisecond}
	for i, w := range want {
		if got := startOffset(i, len(want), ramp); got != w {
			t.Errorf("session %d starts at %v, want %v", i, got, w)
		}
	}
	if got := startOffset(3, 4, 0); got != 0 {
		t.Errorf("no ramp: session 3 starts at %v, want 0", got)
	}
}

// The demo model's energy detector hears speech in 10 ms windows whose RMS
// is at least 1000 (about -30 dBFS); the tone must clear that everywhere,
// with margin, and never clip.
func TestSpeechToneIsLoudInEveryTenMilliseconds(t *testing.T) {
	pcm := speechPCM(30)
	if len(pcm) != 30*frameBytes {
		t.Fatalf("speech of 30 frames is %d bytes, want %d", len(pcm), 30*frameBytes)
	}
	const window = inputRate / 100
	quietest, peak := math.MaxFloat64, 0.0
	for off := 0; off+2*window <= len(pcm); off += 2 * window {
		var sum float64
		for i := range window {
			v := float64(int16(binary.LittleEndian.Uint16(pcm[off+2*i:])))
			sum += v * v
			peak = max(peak, math.Abs(v))
		}
		quietest = min(quietest, math.Sqrt(sum/window))
	}
	if quietest < 2000 {
		t.Errorf("quietest 10 ms of speech has RMS %.0f, want at least 2000", quietest)
	}
	if peak >= math.MaxInt16 {
		t.Errorf("speech clips: peak %.0f", peak)
	}
}
