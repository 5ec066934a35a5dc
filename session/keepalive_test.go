package session

import (
	"testing"
	"time"
)

// A browser streaming audio is recorded as alive without a store per
// frame, and still counts as idle only once the idle timeout has passed
// since its last frame, whichever frames were recorded: never before, and
// at most a grain after. A clock stepped back is recorded at once.
func TestStreamingBrowserIsIdleOnlyAnIdleTimeoutAfterItsLastFrame(t *testing.T) {
	const idle = 90 * time.Second
	for _, every := range []time.Duration{20 * time.Millisecond, 7 * time.Millisecond, 3 * time.Second} {
		c := &conn{}
		var seen int64
		grain := aliveGrain(idle)
		stores, last := 0, t0
		for at := t0; at.Before(t0.Add(10 * time.Second)); at = at.Add(every) {
			before := c.lastSeen.Load()
			c.sighted(at, &seen, grain)
			if c.lastSeen.Load() != before {
				stores++
			}
			last = at
		}
		if idleSince(last.Add(idle-time.Nanosecond), c.lastSeen.Load(), idle) {
			t.Fatalf("frames every %v: idle before %v had passed since the last frame", every, idle)
		}
		if !idleSince(last.Add(idle+time.Duration(grain)), c.lastSeen.Load(), idle) {
			t.Fatalf("frames every %v: not idle a grain (%v) after the idle timeout", every, time.Duration(grain))
		}
		if frames := int(10*time.Second/every) + 1; every < time.Duration(grain) && stores > frames/10 {
			t.Errorf("frames every %v: %d stores for %d frames", every, stores, frames)
		}
		c.sighted(t0.Add(-time.Hour), &seen, grain)
		if c.lastSeen.Load() != t0.Add(-time.Hour).UnixNano() {
			t.Fatalf("frames every %v: a clock stepped back by an hour was not recorded", every)
		}
	}
}
