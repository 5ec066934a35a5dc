package session

// The session's own settings: what one connection, session or user may do,
// and the blocks the model imposes. Each is a row of a table the gateway
// lifts into its own (the same variables, flags, defaults and checks as
// ever); each default comfortably allows the web client and a person
// using it.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/turnstile-gw/turnstile/internal/settings"
	"github.com/turnstile-gw/turnstile/store"
)

// Limits are what one connection, session or user may do. For each, zero
// means no limit (but the sizes, deadlines and rounds, RateAbuseAfter,
// BlockSteps and BlockMemory, which have defaults); the gateway's settings
// supply the usual values.
type Limits struct {
	HistoryMax        int           // history entries kept per session; default 200
	MaxMessageBytes   int           // largest browser WebSocket message; default 64 KiB
	MaxTextChars      int           // longest user text, in characters; default 8000
	SendQueueBytes    int           // outbound bytes queued per browser; default 256 KiB
	WriteTimeout      time.Duration // one write to a browser; default 5 s
	ModelTimeout      time.Duration // one model call; default 60 s
	MaxToolIterations int           // model↔tool rounds per text turn; default 20
	// MessageRate and MessageBurst bound the text frames of one connection
	// (session.start aside): excess is dropped and answered rate_limited.
	MessageRate  float64 // frames per second
	MessageBurst int
	// MicPace bounds microphone audio to this many times real time (16 kHz
	// PCM16, with a one-second burst); excess is dropped and answered
	// rate_limited.
	MicPace float64
	// RateAbuseAfter: a connection over its message or audio rate this
	// long without a break closes 4008; default 10 s.
	RateAbuseAfter time.Duration
	// AbuseCooldown: after a 4008 for rate abuse the user may not connect
	// nor resume, on any node, for this long (the edge refuses the
	// upgrade), escalating on repeats; the close reason says how long.
	// Zero First: no cooldown. Not applied in dev mode.
	AbuseCooldown store.CooldownPolicy
	// TurnsPerMinute bounds the turns a user types, across nodes (in dev
	// mode, per connection).
	TurnsPerMinute int
	// VoiceStartsPerMinute bounds the moves into voice of one session
	// (voice.start, start_voice_session, session.start in voice; resumes
	// do not count).
	VoiceStartsPerMinute int
	// NewSessionsPerMinute bounds the new sessions a user starts, across
	// nodes (in dev mode, per connection); resumes do not count. It bounds
	// what one user can write to Redis: every new session is kept for the
	// session TTL.
	NewSessionsPerMinute int
	// LiveConnectsPerMinute and UserLiveConnectsPerMinute are the
	// upstream-connect budget: the Live connections opened for one session,
	// and for one user's sessions (in dev mode, per connection), across
	// nodes, whatever the reason (voice.start, a resume in voice, goAway,
	// reconnects). Beyond it the browser is told rate_limited and the
	// session stays in text.
	LiveConnectsPerMinute     int
	UserLiveConnectsPerMinute int
	// ResumesPerMinute and UserResumesPerMinute bound the resumes of one
	// session and of one user (in dev mode, per connection), across
	// nodes; beyond them: rate_limited and close 4008.
	ResumesPerMinute     int
	UserResumesPerMinute int
	// ContextMaxTokens bounds the estimated size (chars/4) of a model
	// request: system instruction, tool declarations and history. The
	// oldest history goes first; the current turn always stays.
	ContextMaxTokens int
	// HistoryMaxBytes bounds a session's history (its JSON), in memory and
	// in the store, on top of HistoryMax entries.
	HistoryMaxBytes int
	// ResumeHistoryMax bounds the entries session.ready carries (older
	// ones are paged with history requests). Whatever it is, session.ready
	// and history answers are cut to fit the send queue.
	ResumeHistoryMax int
	// PingInterval: WebSocket pings go to every started connection this
	// often. IdleTimeout: a started connection that sent nothing and
	// answered no ping for this long is closed 4104 (checked every
	// PingInterval, or IdleTimeout/4 without pings).
	PingInterval time.Duration
	IdleTimeout  time.Duration
	// RecentSessionsBytes bounds the history (JSON bytes) of the copies
	// this node keeps of the sessions whose connection ended here in the
	// last IdleTimeout, to write them back should Redis lose them (see
	// recent.go); 0: none kept.
	RecentSessionsBytes int
	// BlockSteps cap the blocks the model imposes (ignore_user): a user's
	// n-th block within BlockMemory lasts at most BlockSteps[n-1], the last
	// step for every later one (block.go); default DefaultBlockSteps.
	BlockSteps []time.Duration
	// BlockMemory is how long a user's blocks count toward escalation
	// after the latest one; default DefaultBlockMemory.
	BlockMemory time.Duration
}

// LimitSettings are the rows of the per-connection, per-session and
// per-user limits (docs/operations.md, "Limits").
func LimitSettings() []settings.Setting[Limits] {
	return []settings.Setting[Limits]{
		settings.Float("TURNSTILE_MESSAGE_RATE", "10", "text frames per second one connection may send (ping included, session.start not); excess is dropped and answered rate_limited", 0.01,
			func(l *Limits) *float64 { return &l.MessageRate }),
		settings.Int("TURNSTILE_MESSAGE_BURST", 40, "text frames one connection may send at once above TURNSTILE_MESSAGE_RATE", 1, -1,
			func(l *Limits) *int { return &l.MessageBurst }),
		settings.Duration("TURNSTILE_RATE_ABUSE_AFTER", "10s", "a connection over its message or audio rate this long without a one-second break is closed 4008", time.Nanosecond,
			func(l *Limits) *time.Duration { return &l.RateAbuseAfter }),
		settings.Float("TURNSTILE_MIC_PACE", "1.25", "microphone audio accepted, in times real time (16 kHz PCM16, one-second burst); excess is dropped and answered rate_limited", 1,
			func(l *Limits) *float64 { return &l.MicPace }),
		settings.Int("TURNSTILE_TURNS_PER_MINUTE", 20, "turns one user may type per minute across all nodes (in dev mode, per connection); 0: no limit", 0, -1,
			func(l *Limits) *int { return &l.TurnsPerMinute }),
		settings.Int("TURNSTILE_VOICE_STARTS_PER_MINUTE", 6, "moves into voice per session and minute (voice.start, start_voice_session, session.start in voice; not resumes); 0: no limit", 0, -1,
			func(l *Limits) *int { return &l.VoiceStartsPerMinute }),
		settings.Int("TURNSTILE_NEW_SESSIONS_PER_MINUTE", 30, "new sessions one user may start per minute across all nodes (in dev mode, per connection; resumes do not count); over it: rate_limited and close 4008; 0: no limit", 0, -1,
			func(l *Limits) *int { return &l.NewSessionsPerMinute }),
		settings.Int("TURNSTILE_CONTEXT_MAX_TOKENS", 32000, "estimated tokens (characters/4) of one model request: system instruction, tool declarations and history; the oldest history is left out first", 1000, -1,
			func(l *Limits) *int { return &l.ContextMaxTokens }),
		settings.Int("TURNSTILE_HISTORY_MAX_BYTES", 512<<10, "bytes of history (JSON) kept per session, in memory and in Redis, on top of TURNSTILE_HISTORY_MAX", 16<<10, -1,
			func(l *Limits) *int { return &l.HistoryMaxBytes }),
		settings.Int("TURNSTILE_RESUME_HISTORY_MAX", 50, "history entries session.ready carries on resume (never more than fits the send queue); older ones are paged with history requests", 1, -1,
			func(l *Limits) *int { return &l.ResumeHistoryMax }),
		settings.Duration("TURNSTILE_PING_INTERVAL", "30s", "how often every started connection gets a WebSocket ping", time.Millisecond,
			func(l *Limits) *time.Duration { return &l.PingInterval }),
		settings.Duration("TURNSTILE_IDLE_TIMEOUT", "90s", "a started connection that sent nothing and answered no ping this long is closed 4104 (more than TURNSTILE_PING_INTERVAL)", time.Millisecond,
			func(l *Limits) *time.Duration { return &l.IdleTimeout }),
		settings.Int("TURNSTILE_RECENT_SESSIONS_BYTES", 64<<20, "bytes of history (JSON) of the sessions whose connection ended on this node in the last TURNSTILE_IDLE_TIMEOUT kept in memory, to write them back if Redis comes back empty; the oldest go first; 0: none kept", 0, -1,
			func(l *Limits) *int { return &l.RecentSessionsBytes }),
	}
}

// The size limits' defaults: the rows below and Config.defaults.
const (
	DefaultHistoryMax      = 200
	DefaultMaxMessageBytes = 64 << 10
	DefaultMaxTextChars    = 8000
	DefaultSendQueueBytes  = 256 << 10
)

// SizeSettings bound what a session keeps and what one message, the send
// queue and one write to the browser may be.
func SizeSettings() []settings.Setting[Limits] {
	return []settings.Setting[Limits]{
		settings.Int("TURNSTILE_HISTORY_MAX", DefaultHistoryMax, "conversation entries kept per session", 2, -1,
			func(l *Limits) *int { return &l.HistoryMax }),
		settings.Int("TURNSTILE_MAX_MESSAGE_BYTES", DefaultMaxMessageBytes, "largest browser WebSocket message accepted, in bytes", 1024, 16<<20,
			func(l *Limits) *int { return &l.MaxMessageBytes }),
		settings.Int("TURNSTILE_MAX_TEXT_CHARS", DefaultMaxTextChars, "longest user text message, in characters", 1, -1,
			func(l *Limits) *int { return &l.MaxTextChars }),
		settings.Int("TURNSTILE_SEND_QUEUE_BYTES", DefaultSendQueueBytes, "outbound bytes queued per browser before it is disconnected as too slow", 64<<10, -1,
			func(l *Limits) *int { return &l.SendQueueBytes }),
		settings.Duration("TURNSTILE_WRITE_TIMEOUT", "5s", "deadline of one write to a browser", time.Nanosecond,
			func(l *Limits) *time.Duration { return &l.WriteTimeout }),
	}
}

// ModelTimeoutSetting is the deadline of one model call.
func ModelTimeoutSetting() settings.Setting[Limits] {
	return settings.Duration("TURNSTILE_MODEL_TIMEOUT", "60s", "deadline of one model call", time.Nanosecond,
		func(l *Limits) *time.Duration { return &l.ModelTimeout })
}

// ToolIterationsSetting bounds the model↔tool rounds of a text turn; a
// number below 1 is taken as 1, with a warning.
func ToolIterationsSetting() settings.Setting[Limits] {
	return settings.Setting[Limits]{Env: "TURNSTILE_MAX_TOOL_ITERATIONS", Def: "20",
		Usage: "model↔tool rounds per text turn (a whole number; below 1 is taken as 1, with a warning)",
		Apply: func(l *Limits, v string) error {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return errors.New("not a whole number")
			}
			if n < 1 {
				l.MaxToolIterations = 1
				return settings.Warning(fmt.Sprintf("TURNSTILE_MAX_TOOL_ITERATIONS=%d is below 1: using 1", n))
			}
			l.MaxToolIterations = n
			return nil
		}}
}

// AbuseCooldownSettings are how long a user closed 4008 for rate abuse is
// kept out (docs/operations.md, "Abuse cooldown").
func AbuseCooldownSettings() []settings.Setting[Limits] {
	return []settings.Setting[Limits]{
		settings.Duration("TURNSTILE_ABUSE_COOLDOWN", "1m", "after a connection is closed 4008 for rate abuse, its user's new connections and resumes are refused (HTTP 429, Retry-After) on every node this long; doubled for each repeat; 0s: no cooldown (not applied in dev mode)", 0,
			func(l *Limits) *time.Duration { return &l.AbuseCooldown.First }),
		settings.Duration("TURNSTILE_ABUSE_COOLDOWN_MAX", "1h", "the longest abuse cooldown, however many repeats (at least TURNSTILE_ABUSE_COOLDOWN)", time.Second,
			func(l *Limits) *time.Duration { return &l.AbuseCooldown.Max }),
		settings.Duration("TURNSTILE_ABUSE_COOLDOWN_MEMORY", "24h", "how long after an abuse cooldown ends another rate abuse of the user still counts as a repeat (and doubles the cooldown)", time.Second,
			func(l *Limits) *time.Duration { return &l.AbuseCooldown.Memory }),
	}
}

// UpstreamBudgetSettings bound the paid Live connections and the resumes
// one session or user may cause, on every node together (issue 24). Each
// default leaves a person using voice far below it: a move into voice is
// one open (at most TURNSTILE_VOICE_STARTS_PER_MINUTE of them), a Live
// connection is replaced about every 10 minutes, a reconnect or a drain is
// one or two opens.
func UpstreamBudgetSettings() []settings.Setting[Limits] {
	return []settings.Setting[Limits]{
		settings.Int("TURNSTILE_LIVE_CONNECTS_PER_MINUTE", 10, "Live upstream connections opened per session and minute across all nodes, whatever the reason (voice.start, a resume in voice, goAway, reconnects); beyond it: rate_limited and the session stays in text; 0: no limit", 0, -1,
			func(l *Limits) *int { return &l.LiveConnectsPerMinute }),
		settings.Int("TURNSTILE_USER_LIVE_CONNECTS_PER_MINUTE", 30, "Live upstream connections opened for one user's sessions per minute across all nodes (in dev mode, per connection); beyond it: rate_limited and the session stays in text; 0: no limit", 0, -1,
			func(l *Limits) *int { return &l.UserLiveConnectsPerMinute }),
		settings.Int("TURNSTILE_RESUMES_PER_MINUTE", 10, "resumes of one session per minute across all nodes; beyond it: rate_limited and close 4008; 0: no limit", 0, -1,
			func(l *Limits) *int { return &l.ResumesPerMinute }),
		settings.Int("TURNSTILE_USER_RESUMES_PER_MINUTE", 30, "resumes of one user's sessions per minute across all nodes (in dev mode, per connection); beyond it: rate_limited and close 4008; 0: no limit", 0, -1,
			func(l *Limits) *int { return &l.UserResumesPerMinute }),
	}
}

// BlockSettings are the blocks the model imposes (ignore_user): they start
// short and escalate (block.go).
func BlockSettings() []settings.Setting[Limits] {
	return []settings.Setting[Limits]{
		{Env: "TURNSTILE_BLOCK_STEPS", Def: "10m,1h,24h",
			Usage: "comma-separated caps of a user's 1st, 2nd, … block by the model (ignore_user) within TURNSTILE_BLOCK_MEMORY; the last applies to every later one; non-decreasing Go durations",
			Apply: func(l *Limits, v string) error {
				steps, err := parseBlockSteps(v)
				if err != nil {
					return err
				}
				l.BlockSteps = steps
				return nil
			}},
		settings.Duration("TURNSTILE_BLOCK_MEMORY", "168h", "how long a user's blocks count toward the next one's step after the latest; an operator's unblock forgets them", time.Minute,
			func(l *Limits) *time.Duration { return &l.BlockMemory }),
	}
}

// maxBlockStep is the longest block ignore_user can ask for (its
// duration_seconds maximum): a longer step would never apply.
const maxBlockStep = 24 * time.Hour

func parseBlockSteps(v string) ([]time.Duration, error) {
	if strings.TrimSpace(v) == "" {
		return nil, errors.New("must list at least one duration, e.g. 10m,1h,24h")
	}
	var steps []time.Duration
	for i, part := range strings.Split(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		switch {
		case err != nil:
			return nil, fmt.Errorf("step %d is not a duration (use a unit: 10m, 1h)", i+1)
		case d < time.Minute || d > maxBlockStep:
			return nil, fmt.Errorf("step %d must be between 1m and 24h", i+1)
		case len(steps) > 0 && d < steps[len(steps)-1]:
			return nil, fmt.Errorf("step %d is shorter than the one before: blocks escalate, never shrink", i+1)
		}
		steps = append(steps, d)
	}
	return steps, nil
}
