package session

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/store"
)

// limit is one of the edge's limits: the closed set of reasons counted in
// turnstile_refusals_total{reason} and logged (at most once a minute per
// connection and reason, with a count).
type limit int

const (
	limitMessageRate   limit = iota // a text frame over the message rate, dropped
	limitAudioRate                  // microphone audio over its pace, dropped
	limitTurns                      // a typed turn over the user's turns per minute
	limitVoiceStarts                // a move into voice over the session's starts per minute
	limitNewSessions                // a new session over the user's new sessions per minute: closed 4008
	limitRateAbuse                  // over a rate for RateAbuseAfter: closed 4008
	limitTokenExpired               // the token expired without a refresh: closed 4001
	limitAuth                       // an auth token refused: closed 4001
	limitIdle                       // no message nor pong for IdleTimeout: closed 4104
	limitInvalidUTF8                // a text frame that is not UTF-8: closed 1007
	limitContext                    // history left out of a model request (ContextMaxTokens)
	limitHistoryBytes               // history dropped for HistoryMaxBytes
	limitResumeHistory              // session.ready's history cut (ResumeHistoryMax, send queue)
	limitHistoryPage                // a history answer cut to fit the send queue
	limitStorageQuota               // a typed turn refused for the user's storage quota
	limitLiveConnects               // a Live open over the session's or user's connect budget
	limitResumes                    // a resume over the session's or user's resumes per minute: closed 4008
	numLimits
)

// limitInfo is how a limit is counted and logged.
type limitInfo struct {
	label string // the metric's reason
	level slog.Level
	msg   string
}

var limits = [numLimits]limitInfo{
	limitMessageRate:   {"message_rate", slog.LevelWarn, "limit: text frames over the message rate dropped"},
	limitAudioRate:     {"audio_rate", slog.LevelWarn, "limit: microphone audio over its pace dropped"},
	limitTurns:         {"turns_per_minute", slog.LevelWarn, "limit: turns over the user's turns per minute refused"},
	limitVoiceStarts:   {"voice_starts_per_minute", slog.LevelWarn, "limit: moves into voice over the starts per minute refused"},
	limitNewSessions:   {"new_sessions_per_minute", slog.LevelWarn, "limit: new sessions over the user's new sessions per minute refused; closing 4008"},
	limitRateAbuse:     {"rate_abuse", slog.LevelWarn, "limit: over a rate for too long; closing 4008"},
	limitTokenExpired:  {"token_expired", slog.LevelInfo, "limit: the token expired without a refresh; closing 4001"},
	limitAuth:          {"auth_refused", slog.LevelWarn, "limit: an auth token was refused; closing 4001"},
	limitIdle:          {"idle", slog.LevelInfo, "limit: no message nor pong for the idle timeout; closing 4104"},
	limitInvalidUTF8:   {"invalid_utf8", slog.LevelWarn, "limit: a text frame is not UTF-8; closing 1007"},
	limitContext:       {"context_trimmed", slog.LevelInfo, "limit: oldest history left out of a model request"},
	limitHistoryBytes:  {"history_bytes", slog.LevelInfo, "limit: oldest history dropped for the history byte bound"},
	limitResumeHistory: {"resume_history_cut", slog.LevelInfo, "limit: session.ready carries only the newest history"},
	limitHistoryPage:   {"history_page_cut", slog.LevelInfo, "limit: a history answer was cut to fit the send queue"},
	limitStorageQuota:  {"quota_exceeded", slog.LevelWarn, "limit: turns refused for the user's storage quota"},
	limitLiveConnects:  {"live_connects_per_minute", slog.LevelWarn, "limit: voice connections over the upstream-connect budget refused; the session stays in text"},
	limitResumes:       {"resumes_per_minute", slog.LevelWarn, "limit: resumes over the resumes per minute refused; closing 4008"},
}

// String is the limit's metric label.
func (l limit) String() string { return limits[l].label }

// limitCounters are the limits' turnstile_refusals_total series of one
// channel, looked up once (a refusal on the audio path allocates nothing).
type limitCounters [numLimits]prometheus.Counter

func newLimitCounters(m *metrics.Metrics, ch metrics.Channel) *limitCounters {
	var lc limitCounters
	for l := range numLimits {
		lc[l] = m.RefusalCounter(l.String(), ch)
	}
	return &lc
}

// Audio is 16 kHz PCM16 from the browser: bytes per second of real time.
const micBytesPerSecond = 16000 * 2

// rateNoticeEvery bounds how often one connection is told rate_limited
// (per kind); the drops in between are silent.
const rateNoticeEvery = time.Second

// overBreak is how long a connection must stay within its rate for a run
// of refusals to end (see RateAbuseAfter).
const overBreak = time.Second

// rates are a connection's message and audio limiters. Only the reader
// uses them, so they need no lock; rate.Limiter allocates nothing.
type rates struct {
	msg, mic   *rate.Limiter // nil: no limit
	msgRun     overRun
	micRun     overRun
	abuseAfter time.Duration
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

func newRates(cfg Config) rates {
	r := rates{abuseAfter: cfg.RateAbuseAfter}
	if cfg.MessageRate > 0 {
		r.msg = rate.NewLimiter(rate.Limit(cfg.MessageRate), max(cfg.MessageBurst, 1))
	}
	if cfg.MicPace > 0 {
		// A one-second burst; a frame longer than that is refused as such.
		r.mic = rate.NewLimiter(rate.Limit(cfg.MicPace*micBytesPerSecond), micBytesPerSecond)
	}
	return r
}

// allowMessage takes one text frame against the message rate; false
// drops it. It may close the connection (4008).
func (c *conn) allowMessage(now time.Time) bool {
	if c.rates.msg == nil || c.rates.msg.AllowN(now, 1) {
		return true
	}
	c.overRate(now, limitMessageRate, &c.rates.msgRun,
		"too many messages: this one was dropped; slow down")
	return false
}

// allowMic takes n bytes of microphone audio against its pace; false drops
// them. It may close the connection (4008).
func (c *conn) allowMic(now time.Time, n int) bool {
	if c.rates.mic == nil || c.rates.mic.AllowN(now, n) {
		return true
	}
	c.overRate(now, limitAudioRate, &c.rates.micRun,
		"microphone audio faster than real time: some was dropped")
	return false
}

func (c *conn) overRate(now time.Time, l limit, run *overRun, msg string) {
	notify, abusive := run.note(now, c.rates.abuseAfter)
	c.refused(l, now)
	if abusive {
		if !c.out.decided() && c.out.close(c.abuseClose(), false) {
			c.refused(limitRateAbuse, now)
		}
		return
	}
	if notify {
		c.send(protocol.NewError(protocol.CodeRateLimited, msg, true, 0))
	}
}

// abuseClose starts the user's abuse cooldown and returns the 4008 for
// rate abuse that tells the browser how long to wait (coolDown).
func (c *conn) abuseClose() protocol.Disconnect {
	d, _ := c.coolDown(protocol.DisconnectRateAbuse)
	return d
}

// coolDown starts the user's abuse cooldown (across nodes: the edge refuses
// the user's upgrades until it ends) for the abuse d closes the connection
// for, and returns d telling the browser how long to wait, and that wait.
// Without a cooldown (none configured, dev mode, a store that does not
// answer) it is d as it is, and 0.
func (c *conn) coolDown(d protocol.Disconnect) (protocol.Disconnect, time.Duration) {
	p := c.m.cfg.AbuseCooldown
	if p.First <= 0 || c.id.Anonymous {
		return d, 0
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.m.cfg.StoreTimeout)
	defer cancel()
	cd, err := c.m.Store.StartCooldown(ctx, c.user, p)
	if err != nil {
		c.log.Warn("abuse cooldown not started: Redis did not answer; closing 4008 without one", "err", err,
			"abuse", d.Label)
		return d, 0
	}
	c.log.Warn("abuse cooldown: the user may not connect nor resume until it ends",
		"until", cd.Until, "cooldown", cd.Left.Round(time.Second), "strikes", cd.Strikes, "abuse", d.Label)
	return d.WithRetryAfter(cd.Left), cd.Left
}

// allowVoiceStart takes one move into voice against the session's starts
// per minute, and tells the browser when it is refused. The window is the
// session's, in Redis: reconnecting and resuming does not reset it. A
// store that does not answer lets the move through.
func (c *conn) allowVoiceStart() bool {
	n := c.m.cfg.VoiceStartsPerMinute
	if n <= 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.m.cfg.StoreTimeout)
	defer cancel()
	lim := store.TurnLimit{Key: c.st.record().ID, Kind: store.KindVoiceStarts, Max: n, Window: time.Minute}
	if allowed, _, err := c.m.Store.CountTurn(ctx, lim, newSessionID()); err != nil || allowed {
		return true
	}
	c.refused(limitVoiceStarts, c.m.now())
	c.send(protocol.NewError(protocol.CodeRateLimited,
		"too many switches to voice in the last minute; the session stays in text, try again shortly", true, 0))
	return false
}

// refused counts one refusal and logs it, at most once a minute per
// connection and reason, with the count since the last line. The limits
// that a client meets by reconnecting in a loop (a new connection each
// time) are logged at most once a minute per node and reason instead.
func (c *conn) refused(l limit, now time.Time) {
	c.refusals[l].Inc()
	n, ok := 0, false
	if l.perNode() {
		n, ok = c.m.limitLogs.Note(limits[l].label, now, 1)
	} else {
		n, ok = c.throttles().limits[l].Note(now, 1)
	}
	if ok {
		c.log.Log(context.Background(), limits[l].level, limits[l].msg, "reason", limits[l].label, "count", n)
	}
}

// perNode reports whether l's log lines are throttled per node rather than
// per connection.
func (l limit) perNode() bool { return l == limitLiveConnects || l == limitResumes }

// allowNewSession counts a new session against the user's new sessions per
// minute, across nodes (one round trip; resumes do not count). Over it,
// the browser is told rate_limited with the wait and closed 4008. A store
// that does not answer lets it through: creating the session then decides.
func (c *conn) allowNewSession() bool {
	n := c.m.cfg.NewSessionsPerMinute
	if n <= 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.m.cfg.StoreTimeout)
	defer cancel()
	allowed, wait, err := c.m.Store.CountTurn(ctx,
		store.TurnLimit{Key: c.limitKey, Kind: store.KindSessions, Max: n, Window: time.Minute}, newSessionID())
	if err != nil || allowed {
		return true
	}
	c.refused(limitNewSessions, c.m.now())
	c.m.Metrics.RefuseSession(limits[limitNewSessions].label, c.id.Channel)
	secs := int(wait.Round(time.Second) / time.Second)
	c.send(protocol.NewError(protocol.CodeRateLimited,
		fmt.Sprintf("too many new sessions in the last minute; try again in %d s", max(secs, 1)), true, 0))
	c.close(protocol.DisconnectNewSessions.WithRetryAfter(wait))
	return false
}
