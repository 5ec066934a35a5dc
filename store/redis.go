package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/transport"
)

// RedisStoreOptions tunes a RedisStore. Zero values take the defaults.
type RedisStoreOptions struct {
	// TTL of every key of a session, refreshed on every write and on resume.
	// Default 24h.
	TTL time.Duration
	// HistoryMax is how many history entries are kept, newest first.
	// Default 200.
	HistoryMax int
	// Timeout bounds each call, on top of the caller's deadline.
	// Default 500ms.
	Timeout time.Duration
	// Observe, when set, is called once per call with its op (create,
	// resume, append, sync or ping), its duration and its error.
	Observe func(op string, d time.Duration, err error)
	// Now is the clock confirmations and blocks expire by; default
	// time.Now.
	Now func() time.Time
	// WaitReplicas is how many replicas must have a user message before
	// the browser is told it was accepted (WAIT after the write, on the
	// connection that wrote it), so that a failover cannot lose it; a
	// timeout there is a store error. 0: no WAIT. TURNSTILE_REDIS_WAIT_REPLICAS;
	// store.DefaultWaitReplicas gives the default of each mode.
	WaitReplicas int
}

// RedisStore is the Store kept in Redis. A session is two keys sharing the
// hash tag of its id, so that they live on one Cluster slot and can be
// written in one MULTI: turnstile:{<id>}:meta (a hash) and
// turnstile:{<id>}:history (a list of JSON transport.Entry, oldest first).
// It is safe for concurrent use.
type RedisStore struct {
	c          redis.UniversalClient
	ttl        time.Duration
	historyMax int
	timeout    time.Duration
	observe    func(op string, d time.Duration, err error)
	now        func() time.Time
}

var _ Store = (*RedisStore)(nil)

// Fields of the meta hash.
const (
	fieldUser            = "user"
	fieldMode            = "mode"
	fieldTurn            = "turn"
	fieldRegistryVersion = "registryVersion"
	fieldCreatedAt       = "createdAt"
	fieldUpdatedAt       = "updatedAt"
	fieldTokenHash       = "tokenHash"
	fieldPendingMessage  = "pendingMessage"
	fieldResumeHandle    = "resumeHandle"
)

// maxIDLen bounds session ids; longer ones are never created by us.
const maxIDLen = 128

//go:embed redis_create.lua
var createLua string

var createScript = redis.NewScript(createLua)

// NewRedisStore returns a store on c. It does not contact Redis.
func NewRedisStore(c redis.UniversalClient, o RedisStoreOptions) *RedisStore {
	s := &RedisStore{c: c, ttl: o.TTL, historyMax: o.HistoryMax, timeout: o.Timeout, observe: o.Observe, now: o.Now}
	if s.now == nil {
		s.now = time.Now
	}
	if s.ttl <= 0 {
		s.ttl = 24 * time.Hour
	}
	if s.historyMax <= 0 {
		s.historyMax = 200
	}
	if s.timeout <= 0 {
		s.timeout = 500 * time.Millisecond
	}
	return s
}

func metaKey(id string) string    { return "turnstile:{" + id + "}:meta" }
func historyKey(id string) string { return "turnstile:{" + id + "}:history" }

// validID refuses ids that would break the hash tag or bloat keys.
func validID(id string) bool {
	return id != "" && len(id) <= maxIDLen && !strings.ContainsAny(id, "{}")
}

// call bounds one operation by the store timeout and reports it to Observe.
func (s *RedisStore) call(ctx context.Context, op string, fn func(ctx context.Context) error) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err := fn(ctx)
	if s.observe != nil {
		s.observe(op, time.Since(start), err)
	}
	return err
}

// Create stores rec under rec.ID, refusing an id that exists, and returns a
// fresh resume token; only its SHA-256 is stored. A zero CreatedAt is set to
// now. One round trip (a Lua script; the very first call on a server that
// has not cached it costs two).
func (s *RedisStore) Create(ctx context.Context, rec Record) (string, error) {
	var token string
	err := s.call(ctx, "create", func(ctx context.Context) error {
		if !validID(rec.ID) {
			return fmt.Errorf("session %q: create: invalid id", rec.ID)
		}
		raw := make([]byte, 32)
		if _, err := rand.Read(raw); err != nil {
			return fmt.Errorf("session %s: create: token: %w", rec.ID, err)
		}
		tok := base64.RawURLEncoding.EncodeToString(raw)
		args := []any{s.ttl.Milliseconds()}
		args = append(args, recordFields(rec, time.Now())...)
		args = append(args, fieldTokenHash, hashToken(tok))
		created, err := createScript.Run(ctx, s.c, []string{metaKey(rec.ID), historyKey(rec.ID)}, args...).Int()
		if err != nil {
			return fmt.Errorf("session %s: create: %w", rec.ID, err)
		}
		if created != 1 {
			return fmt.Errorf("session %s: create: id already exists", rec.ID)
		}
		token = tok
		return nil
	})
	if err != nil {
		return "", err
	}
	return token, nil
}

// Resume reads the record and history in one pipeline, checks token and user,
// then refreshes both TTLs (a second round trip, only once access is
// granted, so that guessing ids cannot keep foreign sessions alive). Every
// refusal is the same ErrResumeRefused.
func (s *RedisStore) Resume(ctx context.Context, id, resumeToken, userID string) (Record, []transport.Entry, error) {
	var (
		rec     Record
		history []transport.Entry
	)
	err := s.call(ctx, "resume", func(ctx context.Context) error {
		refused := fmt.Errorf("session %s: resume: %w", id, ErrResumeRefused)
		if !validID(id) {
			return refused
		}
		var meta *redis.MapStringStringCmd
		var list *redis.StringSliceCmd
		_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			meta = p.HGetAll(ctx, metaKey(id))
			list = p.LRange(ctx, historyKey(id), 0, -1)
			return nil
		})
		if err != nil {
			return fmt.Errorf("session %s: resume: %w", id, err)
		}
		m := meta.Val()
		want := m[fieldTokenHash]
		got := hashToken(resumeToken)
		tokenOK := want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
		userOK := m[fieldUser] != "" && m[fieldUser] == userID
		if !tokenOK || !userOK {
			return refused
		}
		if rec, err = parseRecord(id, m); err != nil {
			return fmt.Errorf("session %s: resume: %w", id, err)
		}
		if history, err = decodeHistory(list.Val()); err != nil {
			return fmt.Errorf("session %s: resume: %w", id, err)
		}
		_, err = s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.PExpire(ctx, metaKey(id), s.ttl)
			p.PExpire(ctx, historyKey(id), s.ttl)
			return nil
		})
		if err != nil {
			return fmt.Errorf("session %s: resume: refresh ttl: %w", id, err)
		}
		return nil
	})
	if err != nil {
		return Record{}, nil, err
	}
	return rec, history, nil
}

// Append adds entries to the history, keeps the newest HistoryMax, records
// rec's turn and mode and refreshes both TTLs, in one MULTI round trip.
func (s *RedisStore) Append(ctx context.Context, rec Record, entries ...transport.Entry) error {
	return s.call(ctx, "append", func(ctx context.Context) error {
		if !validID(rec.ID) {
			return fmt.Errorf("session %q: append: invalid id", rec.ID)
		}
		encoded, err := encodeHistory(entries)
		if err != nil {
			return fmt.Errorf("session %s: append: %w", rec.ID, err)
		}
		mk, hk := metaKey(rec.ID), historyKey(rec.ID)
		_, err = s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			if len(encoded) > 0 {
				p.RPush(ctx, hk, encoded...)
				p.LTrim(ctx, hk, int64(-s.historyMax), -1)
			}
			p.HSet(ctx, mk, turnFields(rec)...)
			p.PExpire(ctx, mk, s.ttl)
			p.PExpire(ctx, hk, s.ttl)
			return nil
		})
		if err != nil {
			return fmt.Errorf("session %s: append: %w", rec.ID, err)
		}
		return nil
	})
}

// Sync replaces the record fields and the whole history (its newest
// HistoryMax entries) in one MULTI, keeping the stored token digest, and
// refreshes both TTLs. It cannot restore a digest Redis has lost: a session
// synced after Redis lost its data keeps running but cannot be resumed.
func (s *RedisStore) Sync(ctx context.Context, rec Record, history []transport.Entry) error {
	return s.call(ctx, "sync", func(ctx context.Context) error {
		if !validID(rec.ID) {
			return fmt.Errorf("session %q: sync: invalid id", rec.ID)
		}
		if len(history) > s.historyMax {
			history = history[len(history)-s.historyMax:]
		}
		encoded, err := encodeHistory(history)
		if err != nil {
			return fmt.Errorf("session %s: sync: %w", rec.ID, err)
		}
		mk, hk := metaKey(rec.ID), historyKey(rec.ID)
		_, err = s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, hk)
			if len(encoded) > 0 {
				p.RPush(ctx, hk, encoded...)
			}
			p.HSet(ctx, mk, recordFields(rec, time.Now())...)
			p.PExpire(ctx, mk, s.ttl)
			p.PExpire(ctx, hk, s.ttl)
			return nil
		})
		if err != nil {
			return fmt.Errorf("session %s: sync: %w", rec.ID, err)
		}
		return nil
	})
}

// Ping reports whether Redis answers within the store timeout.
func (s *RedisStore) Ping(ctx context.Context) error {
	return s.call(ctx, "ping", func(ctx context.Context) error {
		if err := s.c.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("session store: ping: %w", err)
		}
		return nil
	})
}

func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// recordFields lists the meta hash fields of rec as field/value pairs,
// without the token digest.
func recordFields(rec Record, now time.Time) []any {
	createdAt := rec.CreatedAt
	if createdAt.IsZero() {
		createdAt = now
	}
	return []any{
		fieldUser, rec.UserID,
		fieldMode, rec.Mode,
		fieldTurn, strconv.Itoa(rec.Turn),
		fieldRegistryVersion, rec.RegistryVersion,
		fieldCreatedAt, formatTime(createdAt),
		fieldUpdatedAt, formatTime(now),
		fieldPendingMessage, rec.PendingMessage,
		fieldResumeHandle, rec.ResumeHandle,
	}
}

// turnFields are the meta fields a turn changes.
func turnFields(rec Record) []any {
	return []any{fieldTurn, strconv.Itoa(rec.Turn), fieldMode, rec.Mode,
		fieldPendingMessage, rec.PendingMessage, fieldResumeHandle, rec.ResumeHandle,
		fieldUpdatedAt, formatTime(time.Now())}
}

func parseRecord(id string, m map[string]string) (Record, error) {
	turn, err := strconv.Atoi(m[fieldTurn])
	if err != nil {
		return Record{}, fmt.Errorf("bad %s field: %w", fieldTurn, err)
	}
	created, err := time.Parse(time.RFC3339Nano, m[fieldCreatedAt])
	if err != nil {
		return Record{}, fmt.Errorf("bad %s field: %w", fieldCreatedAt, err)
	}
	return Record{
		ID:              id,
		UserID:          m[fieldUser],
		Mode:            m[fieldMode],
		Turn:            turn,
		RegistryVersion: m[fieldRegistryVersion],
		CreatedAt:       created,
		PendingMessage:  m[fieldPendingMessage],
		ResumeHandle:    m[fieldResumeHandle],
	}, nil
}

func encodeHistory(entries []transport.Entry) ([]any, error) {
	out := make([]any, 0, len(entries))
	for i, e := range entries {
		b, err := json.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("encode entry %d: %w", i, err)
		}
		out = append(out, string(b))
	}
	return out, nil
}

func decodeHistory(raw []string) ([]transport.Entry, error) {
	out := make([]transport.Entry, 0, len(raw))
	for i, r := range raw {
		var e transport.Entry
		if err := json.Unmarshal([]byte(r), &e); err != nil {
			return nil, fmt.Errorf("decode history entry %d: %w", i, err)
		}
		out = append(out, e)
	}
	return out, nil
}
