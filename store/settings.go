package store

// The store's own settings: which Redis holds the sessions and how it is
// read, each call's deadline, how long a session's state lives, and the
// timelines and event stream kept beside it. Each is a row of a table the
// gateway lifts into its own.

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/turnstile-gw/turnstile/internal/settings"
)

// Redis is the store's configuration. Zero values take the defaults noted.
type Redis struct {
	// RedisURL is the Redis that holds the sessions, in the form RedisMode
	// reads (NewRedisModeClient); "" is the gateway's embedded miniredis.
	RedisURL  settings.SecretURL
	RedisMode RedisMode // how RedisURL is read: single, cluster or sentinel
	// RedisWaitReplicas is how many replicas must have a user message
	// before the browser is told it was accepted (WAIT after the write, on
	// the connection that wrote it), so that a failover cannot lose it; a
	// timeout there is a store error. 0: no WAIT. DefaultWaitReplicas gives
	// the default of each mode.
	RedisWaitReplicas int
	// RedisTimeout bounds each call, on top of the caller's deadline.
	// Default 500ms.
	RedisTimeout time.Duration
	// SessionTTL is the life of every key of a session, refreshed on every
	// write and on resume. Default 24h.
	SessionTTL time.Duration
	// TimelineMax is how many entries a session's timeline keeps, the
	// newest. Default DefaultTimelineMax.
	TimelineMax int
	// EventsStream, when set, is the Redis Stream every finished turn's
	// timeline entry is appended to (XADD, approximate MAXLEN
	// EventsMaxLen, default DefaultEventsMaxLen).
	EventsStream string
	EventsMaxLen int
	// UserStorageBytes is the most bytes of history (JSON) all of one
	// user's sessions may keep, across every node: a new turn the quota
	// has no room for is refused (TurnStart.OverQuota). 0: no quota, and
	// nothing counted. See storage.go.
	UserStorageBytes int
}

// maxWaitReplicas bounds TURNSTILE_REDIS_WAIT_REPLICAS: more replicas than
// that are a typo, and every one of them is waited for on each message.
const maxWaitReplicas = 16

// ConnectionSettings are the rows of the Redis the sessions live in: its
// mode, its URL (checked against the mode, so after it) and the replicas
// a message waits for (whose default depends on the mode).
func ConnectionSettings() []settings.Setting[Redis] {
	return []settings.Setting[Redis]{
		// Before REDIS_URL, which is checked against the mode.
		{Env: "TURNSTILE_REDIS_MODE", Def: string(RedisSingle),
			Usage: "how REDIS_URL is read: single (one server), cluster (a Redis Cluster: redis://h1:p1?addr=h2:p2&addr=h3:p3) " +
				"or sentinel (redis://s1:26379?master_name=NAME&addr=s2:26379)",
			Apply: func(r *Redis, v string) error {
				m, err := ParseRedisMode(v)
				if err != nil {
					return err
				}
				r.RedisMode = m
				return nil
			}},
		{Env: "REDIS_URL", DefDoc: "unset: embedded miniredis, state lives in this process only",
			Usage: "redis:// or rediss:// URL of the Redis that holds session state, in the form TURNSTILE_REDIS_MODE reads",
			Apply: parseRedisURL},
		{Env: "TURNSTILE_REDIS_WAIT_REPLICAS", DefDoc: "1 in cluster and sentinel mode, 0 in single mode",
			Usage: fmt.Sprintf("replicas that must have a user message (Redis WAIT) before the browser is told it was accepted, so that a failover cannot lose it; 0: no WAIT (between 0 and %d)", maxWaitReplicas),
			Apply: parseRedisWaitReplicas},
	}
}

// SessionTTLSetting is the row of a session's life in Redis.
func SessionTTLSetting() settings.Setting[Redis] {
	return settings.Duration("TURNSTILE_SESSION_TTL", "24h", "how long an idle session's state is kept in Redis", time.Second,
		func(r *Redis) *time.Duration { return &r.SessionTTL })
}

// TimeoutSetting is the row of one Redis call's deadline.
func TimeoutSetting() settings.Setting[Redis] {
	return settings.Duration("TURNSTILE_REDIS_TIMEOUT", "500ms", "deadline of one Redis call", time.Nanosecond,
		func(r *Redis) *time.Duration { return &r.RedisTimeout })
}

// TimelineSettings are the rows of the sessions' timelines and the event
// stream of finished turns.
func TimelineSettings() []settings.Setting[Redis] {
	return []settings.Setting[Redis]{
		settings.Int("TURNSTILE_TIMELINE_MAX", DefaultTimelineMax, "entries (turns and events) a session's timeline keeps in Redis, the newest", 1, 10000,
			func(r *Redis) *int { return &r.TimelineMax }),
		EventsStreamSetting(),
		settings.Int("TURNSTILE_EVENTS_MAXLEN", DefaultEventsMaxLen, "approximate length the event stream is trimmed to (XADD MAXLEN ~)", 1, -1,
			func(r *Redis) *int { return &r.EventsMaxLen }),
	}
}

// UserStorageSetting is the row of the per-user storage quota.
func UserStorageSetting() settings.Setting[Redis] {
	return settings.Int("TURNSTILE_USER_STORAGE_BYTES", 20<<20, "bytes of history (JSON) all of one user's sessions may keep in Redis, across all nodes; a typed turn it has no room for is refused quota_exceeded; not kept in dev mode; 0: no quota", 0, -1,
		func(r *Redis) *int { return &r.UserStorageBytes })
}

// EventsStreamSetting is the row of the event stream's key.
func EventsStreamSetting() settings.Setting[Redis] {
	return settings.Setting[Redis]{Env: "TURNSTILE_EVENTS_STREAM", DefDoc: "unset: no stream",
		Usage: "Redis Stream key that receives every finished turn's timeline entry (XADD), in the sessions' Redis",
		Apply: settings.Plain(func(r *Redis) *string { return &r.EventsStream })}
}

func parseRedisURL(r *Redis, v string) error {
	if v == "" {
		return nil
	}
	// url.Parse errors quote the whole URL, password included, so they are not passed on.
	u, err := url.Parse(v)
	if err != nil {
		return errors.New("not a valid URL")
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return errors.New("must be a redis:// or rediss:// URL")
	}
	// An empty mode is a TURNSTILE_REDIS_MODE that failed: its own error
	// says so, and the URL cannot be read without it.
	if r.RedisMode != "" {
		if err := CheckRedisURL(r.RedisMode, v); err != nil {
			return err
		}
	}
	r.RedisURL = settings.SecretURL(v)
	return nil
}

// parseRedisWaitReplicas reads TURNSTILE_REDIS_WAIT_REPLICAS; unset, it is
// the default of TURNSTILE_REDIS_MODE (parsed before it).
func parseRedisWaitReplicas(r *Redis, v string) error {
	if strings.TrimSpace(v) == "" {
		r.RedisWaitReplicas = DefaultWaitReplicas(r.RedisMode)
		return nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	switch {
	case err != nil:
		return errors.New("not a whole number")
	case n < 0 || n > maxWaitReplicas:
		return fmt.Errorf("must be between 0 and %d", maxWaitReplicas)
	}
	r.RedisWaitReplicas = n
	return nil
}
