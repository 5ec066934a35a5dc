package session

import (
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/session/voice"
)

// observations is a prometheus.Observer that keeps what it is given.
type observations []float64

func (o *observations) Observe(v float64) { *o = append(*o, v) }

func TestOneMicrophoneFrameInASampleIsTimedFromItsRead(t *testing.T) {
	var in observations
	r := &conn{relay: &relaySeries{in: &in}}
	read := time.Now().Add(-time.Second) // read a second ago
	for range 3 * voice.RelaySampleEvery {
		r.micSent(read)
	}
	if len(in) != 3 {
		t.Fatalf("%d of %d frames timed, want one in %d", len(in), 3*voice.RelaySampleEvery, voice.RelaySampleEvery)
	}
	if in[0] < 1 {
		t.Errorf("a frame read a second before it went up timed at %v s", in[0])
	}
}
