package session

import (
	"context"
	"log/slog"
	"time"

	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/protocol"
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
	label metrics.RefusalReason // the metric's reason
	level slog.Level
	msg   string
}

var limits = [numLimits]limitInfo{
	limitMessageRate:   {metrics.RefusedMessageRate, slog.LevelWarn, "limit: text frames over the message rate dropped"},
	limitAudioRate:     {metrics.RefusedAudioRate, slog.LevelWarn, "limit: microphone audio over its pace dropped"},
	limitTurns:         {metrics.RefusedTurnsPerMinute, slog.LevelWarn, "limit: turns over the user's turns per minute refused"},
	limitVoiceStarts:   {metrics.RefusedVoiceStartsPerMinute, slog.LevelWarn, "limit: moves into voice over the starts per minute refused"},
	limitNewSessions:   {metrics.RefusedNewSessionsPerMinute, slog.LevelWarn, "limit: new sessions over the user's new sessions per minute refused; closing 4008"},
	limitRateAbuse:     {metrics.RefusedRateAbuse, slog.LevelWarn, "limit: over a rate for too long; closing 4008"},
	limitTokenExpired:  {metrics.RefusedTokenExpired, slog.LevelInfo, "limit: the token expired without a refresh; closing 4001"},
	limitAuth:          {metrics.RefusedAuth, slog.LevelWarn, "limit: an auth token was refused; closing 4001"},
	limitIdle:          {metrics.RefusedIdle, slog.LevelInfo, "limit: no message nor pong for the idle timeout; closing 4104"},
	limitInvalidUTF8:   {metrics.RefusedInvalidUTF8, slog.LevelWarn, "limit: a text frame is not UTF-8; closing 1007"},
	limitContext:       {metrics.RefusedContextTrimmed, slog.LevelInfo, "limit: oldest history left out of a model request"},
	limitHistoryBytes:  {metrics.RefusedHistoryBytes, slog.LevelInfo, "limit: oldest history dropped for the history byte bound"},
	limitResumeHistory: {metrics.RefusedResumeHistoryCut, slog.LevelInfo, "limit: session.ready carries only the newest history"},
	limitHistoryPage:   {metrics.RefusedHistoryPageCut, slog.LevelInfo, "limit: a history answer was cut to fit the send queue"},
	limitStorageQuota:  {metrics.RefusedQuotaExceeded, slog.LevelWarn, "limit: turns refused for the user's storage quota"},
	limitLiveConnects:  {metrics.RefusedLiveConnectsPerMinute, slog.LevelWarn, "limit: voice connections over the upstream-connect budget refused; the session stays in text"},
	limitResumes:       {metrics.RefusedResumesPerMinute, slog.LevelWarn, "limit: resumes over the resumes per minute refused; closing 4008"},
}

// String is the limit's metric label.
func (l limit) String() string { return string(limits[l].label) }

// allowMessage takes one text frame against the message rate; false
// drops it. It may close the connection (4008).
func (c *conn) allowMessage(now time.Time) bool {
	return c.overRate(now, c.rates.message(now), limitMessageRate,
		"too many messages: this one was dropped; slow down")
}

// allowMic takes n bytes of microphone audio against its pace; false drops
// them. It may close the connection (4008).
func (c *conn) allowMic(now time.Time, n int) bool {
	return c.overRate(now, c.rates.audio(now, n), limitAudioRate,
		"microphone audio faster than real time: some was dropped")
}

// overRate acts on a frame's rate verdict v; it reports whether the frame
// is handled.
func (c *conn) overRate(now time.Time, v rateVerdict, l limit, msg string) bool {
	if v == rateOK {
		return true
	}
	c.refused(l, now)
	switch v {
	case rateAbuse:
		c.abuse()
	case rateNotify:
		c.send(protocol.NewError(protocol.CodeRateLimited, msg, true, 0))
	}
	return false
}

// abuse closes the connection 4008 for rate abuse, once a close is not
// decided already. The user's abuse cooldown starts in the store first
// (the close tells the browser how long it lasts), on a goroutine of its
// own: the reader does not wait for Redis. The connection's end waits for
// it (closer.later).
func (c *conn) abuse() {
	if c.out.decided() {
		return
	}
	c.out.later.Add(1)
	go func() {
		defer c.out.later.Done()
		d, _ := c.m.coolDown(c.ctx, &c.id, c.log(), protocol.DisconnectRateAbuse)
		if c.ctx.Err() == nil && c.out.close(d, false) {
			c.refused(limitRateAbuse, c.m.now())
		}
	}()
}

// coolDown starts the user's abuse cooldown (across nodes: the edge refuses
// the user's upgrades until it ends) for the abuse d closes the connection
// for, and returns d telling the browser how long to wait, and that wait.
// Without a cooldown (none configured, dev mode, a store that does not
// answer) it is d as it is, and 0.
func (m *Manager) coolDown(ctx context.Context, id *Identity, log *slog.Logger, d protocol.Disconnect) (protocol.Disconnect, time.Duration) {
	p := m.cfg.AbuseCooldown
	if p.First <= 0 || id.Anonymous {
		return d, 0
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.StoreTimeout)
	defer cancel()
	cd, err := m.Store.StartCooldown(ctx, id.User, p)
	if err != nil {
		log.Warn("abuse cooldown not started: Redis did not answer; closing 4008 without one", "err", err,
			"abuse", d.Label)
		return d, 0
	}
	log.Warn("abuse cooldown: the user may not connect nor resume until it ends",
		"until", cd.Until, "cooldown", cd.Left.Round(time.Second), "strikes", cd.Strikes, "abuse", d.Label)
	return d.WithRetryAfter(cd.Left), cd.Left
}

// refused counts one refusal and logs it, at most once a minute per
// connection and reason, with the count since the last line. The limits
// that a client meets by reconnecting in a loop (a new connection each
// time) are logged at most once a minute per node and reason instead.
func (c *conn) refused(l limit, now time.Time) {
	if n, ok := c.refusals.note(l, now); ok {
		c.log().Log(context.Background(), limits[l].level, limits[l].msg, "reason", limits[l].label, "count", n)
	}
}
