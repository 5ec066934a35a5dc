package fakegemini

import (
	"strconv"
	"strings"
	"time"

	"github.com/turnstile-gw/turnstile/audio"
)

// Energy-based voice activity detection for the demo model: the RMS of
// every 10 ms frame of PCM16 input is compared with audio.SpeechRMS. Speech
// starts after vadStartFrames loud frames in a row and ends after
// vadEndFrames quiet ones. Time is counted in samples, not wall time, so
// the result depends only on the audio.
const (
	vadFrame       = 10 * time.Millisecond
	vadStartFrames = 10  // 100 ms of sound
	vadEndFrames   = 60  // 600 ms of silence
	vadTickFrames  = 100 // a "still speaking" tick per second of speech, on a loud frame
)

type vadKind int

const (
	vadStart vadKind = iota + 1 // the user started speaking
	vadTick                     // the user has been speaking for another second
	vadEnd                      // the user stopped; Speech says for how long
)

type vadEvent struct {
	Kind   vadKind
	Speech time.Duration
}

// energyDetector finds speech in a stream of PCM16LE mono audio.
type energyDetector struct {
	frameBytes int
	pending    []byte
	loudRun    int // loud frames in a row
	quietRun   int // quiet frames in a row
	speaking   bool
	spoken     int // frames since the speech started (its first loud frame)
	nextTick   int // the value of spoken at which the next tick is due
}

func newEnergyDetector(rate int) *energyDetector {
	samples := max(1, rate*int(vadFrame/time.Millisecond)/1000)
	return &energyDetector{frameBytes: 2 * samples}
}

// feed consumes pcm and reports the transitions it contains, in order.
func (d *energyDetector) feed(pcm []byte) []vadEvent {
	var evs []vadEvent
	d.pending = append(d.pending, pcm...)
	for len(d.pending) >= d.frameBytes {
		if ev, ok := d.frame(d.pending[:d.frameBytes]); ok {
			evs = append(evs, ev)
		}
		d.pending = d.pending[d.frameBytes:]
	}
	d.pending = append([]byte(nil), d.pending...) // do not pin the caller's buffers
	return evs
}

func (d *energyDetector) frame(f []byte) (vadEvent, bool) {
	loud := audio.Loud(f)
	if !d.speaking {
		if !loud {
			d.loudRun = 0
			return vadEvent{}, false
		}
		d.loudRun++
		if d.loudRun < vadStartFrames {
			return vadEvent{}, false
		}
		d.speaking, d.spoken, d.quietRun, d.nextTick = true, d.loudRun, 0, vadTickFrames
		return vadEvent{Kind: vadStart}, true
	}
	d.spoken++
	if !loud {
		if d.quietRun++; d.quietRun >= vadEndFrames {
			return d.stop(), true
		}
		return vadEvent{}, false
	}
	d.quietRun = 0
	if d.spoken >= d.nextTick {
		d.nextTick += vadTickFrames
		return vadEvent{Kind: vadTick}, true
	}
	return vadEvent{}, false
}

// flush ends speech in progress, e.g. at audioStreamEnd.
func (d *energyDetector) flush() (vadEvent, bool) {
	d.pending, d.loudRun = nil, 0
	if !d.speaking {
		return vadEvent{}, false
	}
	return d.stop(), true
}

func (d *energyDetector) stop() vadEvent {
	ev := vadEvent{Kind: vadEnd, Speech: time.Duration(d.spoken-d.quietRun) * vadFrame}
	d.speaking, d.loudRun, d.quietRun, d.spoken, d.nextTick = false, 0, 0, 0, 0
	return ev
}

// pcmRate reads the sample rate from a MIME type such as
// "audio/pcm;rate=16000"; Live input defaults to 16 kHz.
func pcmRate(mime string) int {
	for _, p := range strings.Split(mime, ";") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(p), "rate="); ok {
			if r, err := strconv.Atoi(v); err == nil && r > 0 {
				return r
			}
		}
	}
	return 16000
}
