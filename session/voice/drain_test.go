package voice

import (
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// ended reports the reason the host was told voice ended, without waiting.
func (h *fakeHost) endedYet() (string, bool) {
	select {
	case r := <-h.ended:
		return r, true
	default:
		return "", false
	}
}

// Ending voice lets the goodbye's audio out first: the host is told only
// once the browser has been sent it (signalled, not polled).
func TestEndWaitsForTheGoodbyeAudioBeforeTellingTheHost(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	host := newFakeHost()
	host.drained = make(chan struct{})
	r := newRigOn(t, clk, host)

	r.v.End("client")
	testwait.For(t, "the drain to wait for the browser's audio", func() bool { return clk.Timers() == 1 })
	if why, ok := host.endedYet(); ok {
		t.Fatalf("voice ended (%q) with the goodbye's audio still queued", why)
	}
	close(host.drained)
	if got := <-host.ended; got != "client" {
		t.Fatalf("ended with %q, want client", got)
	}
}

// A browser that never takes the goodbye's audio holds the end of voice
// for DrainMax on the session's clock, not for ever.
func TestEndStopsWaitingForAudioAfterDrainMax(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	host := newFakeHost()
	host.drained = make(chan struct{}) // never closed: the browser reads nothing
	r := newRigOn(t, clk, host)

	r.v.End("client")
	testwait.For(t, "the drain to wait for the browser's audio", func() bool { return clk.Timers() == 1 })
	clk.Advance(time.Second - time.Millisecond)
	if why, ok := host.endedYet(); ok {
		t.Fatalf("voice ended (%q) before DrainMax", why)
	}
	clk.Advance(time.Millisecond)
	if got := <-host.ended; got != "client" {
		t.Fatalf("ended with %q, want client", got)
	}
}

// Idle is closed when the last open turn ends, so a drain waits for the
// turn without polling Busy.
func TestIdleIsSignalledWhenTheTurnEnds(t *testing.T) {
	r := newRig(t)
	r.up.say(audioEv(960))
	testwait.For(t, "the turn to open", r.v.Busy)
	idle := r.v.Idle()
	select {
	case <-idle:
		t.Fatal("Idle closed while a turn is under way")
	default:
	}
	r.up.say(turnComplete)
	<-idle
	if r.v.Busy() {
		t.Fatal("Idle closed but the session is still busy")
	}
	select {
	case <-r.v.Idle():
	default:
		t.Fatal("Idle of a session with no turn is not closed")
	}
}
