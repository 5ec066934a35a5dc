package session

import (
	"time"

	"golang.org/x/time/rate"
)

// A connection's reader takes every text frame against the message rate
// and every microphone frame against its pace. A frame over a rate is
// dropped; the browser is told at most once per rateNoticeEvery; a run of
// drops with no break of overBreak that lasts RateAbuseAfter is abuse, and
// the connection is closed 4008 (limits.go).

// Audio is 16 kHz PCM16 from the browser: bytes per second of real time.
const micBytesPerSecond = 16000 * 2

// rateNoticeEvery bounds how often one connection is told rate_limited
// (per kind); the drops in between are silent.
const rateNoticeEvery = time.Second

// overBreak is how long a connection must stay within its rate for a run
// of refusals to end (see RateAbuseAfter).
const overBreak = time.Second

// rateVerdict is what one frame taken against a rate calls for.
type rateVerdict uint8

const (
	rateOK     rateVerdict = iota // within the rate: handled
	rateDrop                      // over it: dropped without a word
	rateNotify                    // over it: dropped, and the browser told rate_limited
	rateAbuse                     // over it for the abuse time: dropped, and the connection closed 4008 (once)
)

// rates are a connection's message and audio limiters. Only the reader
// uses them, so they need no lock; rate.Limiter allocates nothing.
type rates struct {
	msgLimit   rate.Limit // messages per second; 0: no limit
	msgBurst   int
	msg        *rate.Limiter // from the first message on (a limiter starts with its burst, then as now)
	msgRun     *overRun      // from the first message over the rate on (72 bytes most never use)
	micPace    rate.Limit    // bytes per second; 0: audio not paced
	mic        *micRate      // from the first microphone frame on
	abuseAfter time.Duration
	abused     bool // rateAbuse was given: it is given once
}

// micRate is the microphone's pace, made at the connection's first audio
// frame: a text session, most of them idle, never has one (160 bytes).
type micRate struct {
	lim *rate.Limiter
	run overRun
}

func newRates(cfg Config) rates {
	r := rates{abuseAfter: cfg.RateAbuseAfter}
	if cfg.MessageRate > 0 {
		r.msgLimit, r.msgBurst = rate.Limit(cfg.MessageRate), max(cfg.MessageBurst, 1)
	}
	if cfg.MicPace > 0 {
		r.micPace = rate.Limit(cfg.MicPace * micBytesPerSecond)
	}
	return r
}

// message takes one text frame read at now against the message rate.
func (r *rates) message(now time.Time) rateVerdict {
	if r.msgLimit == 0 {
		return rateOK
	}
	if r.msg == nil {
		// An idle connection never needs one (80 bytes).
		r.msg = rate.NewLimiter(r.msgLimit, r.msgBurst)
	}
	if r.msg.AllowN(now, 1) {
		return rateOK
	}
	if r.msgRun == nil {
		r.msgRun = &overRun{}
	}
	return r.over(now, r.msgRun)
}

// audio takes n bytes of microphone audio read at now against its pace.
func (r *rates) audio(now time.Time, n int) rateVerdict {
	if r.micPace == 0 {
		return rateOK
	}
	if r.mic == nil {
		// A one-second burst; a frame longer than that is refused as such.
		r.mic = &micRate{lim: rate.NewLimiter(r.micPace, micBytesPerSecond)}
	}
	if r.mic.lim.AllowN(now, n) {
		return rateOK
	}
	return r.over(now, &r.mic.run)
}

// pacesAudio reports whether microphone audio is paced (and a frame over
// one second of audio refused as such).
func (r *rates) pacesAudio() bool { return r.micPace != 0 }

func (r *rates) over(now time.Time, run *overRun) rateVerdict {
	notify, abusive := run.note(now, r.abuseAfter)
	switch {
	case abusive && r.abused:
		return rateDrop // the close is on its way
	case abusive:
		r.abused = true
		return rateAbuse
	case notify:
		return rateNotify
	}
	return rateDrop
}

// overRun is a run of refusals with no break of overBreak between them.
type overRun struct {
	since, last, noticed time.Time
}

// note records a refusal at now; it reports whether the browser should be
// told (at most once per rateNoticeEvery) and whether the run has lasted
// past abuse.
func (r *overRun) note(now time.Time, abuse time.Duration) (notify, abusive bool) {
	if now.Sub(r.last) > overBreak {
		r.since = now
	}
	r.last = now
	if now.Sub(r.noticed) >= rateNoticeEvery {
		r.noticed, notify = now, true
	}
	return notify, now.Sub(r.since) >= abuse
}
