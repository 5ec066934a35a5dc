package session

import (
	"testing"
	"time"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func TestMessageRateLetsTheBurstThroughThenDropsAndTellsOnceASecond(t *testing.T) {
	r := newRates(Config{Limits: Limits{MessageRate: 2, MessageBurst: 3, RateAbuseAfter: 10 * time.Second}})
	for i := range 3 {
		if v := r.message(t0); v != rateOK {
			t.Fatalf("message %d of a burst of 3: %v, want it handled", i+1, v)
		}
	}
	if v := r.message(t0); v != rateNotify {
		t.Fatalf("the 4th message at once: %v, want dropped and the browser told", v)
	}
	if v := r.message(t0.Add(100 * time.Millisecond)); v != rateDrop {
		t.Fatalf("another 100 ms later: %v, want dropped silently (told once a second)", v)
	}
	notices := 0
	for ms := 110; ms < 3000; ms += 10 { // 100 a second against 2 a second
		if r.message(t0.Add(time.Duration(ms)*time.Millisecond)) == rateNotify {
			notices++
		}
	}
	if notices != 2 {
		t.Fatalf("told %d times more in the next 2.9 s of flood, want once a second (2)", notices)
	}
}

func TestRateAbuseIsGivenOnceAfterARunOfTheAbuseTime(t *testing.T) {
	r := newRates(Config{Limits: Limits{MessageRate: 1, MessageBurst: 1, RateAbuseAfter: 3 * time.Second}})
	abuses, first := 0, time.Duration(0)
	for ms := 0; ms <= 5000; ms += 10 { // 100 a second against 1 a second
		at := time.Duration(ms) * time.Millisecond
		if r.message(t0.Add(at)) == rateAbuse {
			if abuses++; abuses == 1 {
				first = at
			}
		}
	}
	// The first message passes (the burst); the run of drops starts 10 ms in.
	if abuses != 1 || first != 3*time.Second+10*time.Millisecond {
		t.Fatalf("abuse given %d times, first after %v; want once, 3 s into the run of drops", abuses, first)
	}
}

func TestMicPaceDropsAudioFasterThanRealTime(t *testing.T) {
	r := newRates(Config{Limits: Limits{MicPace: 1, RateAbuseAfter: 10 * time.Second}})
	if !r.pacesAudio() {
		t.Fatal("a pace of 1 does not pace audio")
	}
	frame := micBytesPerSecond / 50 // 20 ms
	now, dropped := t0, 0
	for range 300 { // six seconds of audio in three: a one-second burst and three of pace let four through
		now = now.Add(10 * time.Millisecond)
		if r.audio(now, frame) != rateOK {
			dropped++
		}
	}
	if dropped < 90 || dropped > 110 {
		t.Fatalf("%d of 300 frames dropped at twice real time for 3 s with a one-second burst, want about 100", dropped)
	}
	if off := newRates(Config{}); off.pacesAudio() || off.audio(t0, 1<<20) != rateOK || off.message(t0) != rateOK {
		t.Fatal("no rates configured, yet something was limited")
	}
}

func TestOverRunNotifiesOnceASecondAndFlagsARunPastTheAbuseTime(t *testing.T) {
	var r overRun
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	notices := 0
	for ms := 0; ms < 9990; ms += 10 {
		notify, abusive := r.note(t0.Add(time.Duration(ms)*time.Millisecond), 10*time.Second)
		if abusive {
			t.Fatalf("flagged after %d ms of a 10 s limit", ms)
		}
		if notify {
			notices++
		}
	}
	if notices != 10 {
		t.Fatalf("%d notices in 10 s of refusals, want one a second", notices)
	}
	if _, abusive := r.note(t0.Add(10*time.Second), 10*time.Second); !abusive {
		t.Fatal("a run of 10 s not flagged")
	}
	// A break of more than a second starts a new run.
	if _, abusive := r.note(t0.Add(11500*time.Millisecond), 10*time.Second); abusive {
		t.Fatal("a refusal after a break is still the old run")
	}
}
