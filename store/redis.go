package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/transport"
)

// RedisStoreOptions tunes a RedisStore. Zero values take the defaults.
type RedisStoreOptions struct {
	// Redis are the store's settings (settings.go): the session TTL
	// (default 24h), each call's deadline (default 500ms), the replicas a
	// user message waits for, the timelines and the event stream. Its
	// URL and mode are NewRedisModeClient's, not read here.
	Redis
	// HistoryMax is how many history entries are kept, newest first.
	// Default 200.
	HistoryMax int
	// HistoryMaxBytes bounds the stored history's JSON, newest first (the
	// newest entry is always kept). Default DefaultHistoryMaxBytes.
	HistoryMaxBytes int
	// WatchInterval is how often Watch checks that Redis still holds this
	// node's marker (a Redis that restarted empty or was flushed is seen
	// within it). Default 1 s.
	WatchInterval time.Duration
	// Observe, when set, is called once per call with its op (one of
	// metrics.RedisOps: create,
	// resume, append, restore, turns, epochs, ping, …), its duration and
	// its error. Refusals (ErrResumeRefused, ErrFenced, ErrSessionGone,
	// ErrNotHandedOff) are outcomes, not failures: they are reported as a
	// nil error.
	Observe func(op metrics.RedisOp, d time.Duration, err error)
	// Now is the clock confirmations, blocks and turn windows go by;
	// default the system clock.
	Now func() time.Time
}

// DefaultHistoryMaxBytes is the default bound of a session's stored history.
const DefaultHistoryMaxBytes = 512 << 10

// RedisStore is the Store kept in Redis. A session is two keys sharing the
// hash tag of its id, so that they live on one Cluster slot and are written
// together by one Lua script: turnstile:{<id>}:meta (a hash) and
// turnstile:{<id>}:history (a list of JSON transport.Entry, oldest first).
// Every write of a session checks the writer's epoch in that script
// (fencing). It is safe for concurrent use.
type RedisStore struct {
	c             redis.UniversalClient
	ttl           time.Duration
	historyMax    int
	historyBytes  int
	timeout       time.Duration
	watchInterval time.Duration
	observe       func(op metrics.RedisOp, d time.Duration, err error)
	now           func() time.Time
	waitReplicas  int
	timelineMax   int
	eventsStream  string
	eventsMaxLen  int64
	userStorage   int64
	// marked holds the nodes whose marker Watch has set (see MarkerGone).
	marked sync.Map
	// markerMu orders Watch's marker probes with MarkerGone, and
	// lossPending holds the nodes whose probe found the marker gone and
	// whose Watcher has not heard Lost yet: between the probe setting the
	// marker again and Lost returning, MarkerGone still says gone, so a
	// caller that asks MarkerGone and then what Lost recorded cannot miss
	// the loss in between.
	markerMu    sync.Mutex
	lossPending sync.Map
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
	fieldEpoch           = "epoch"
	fieldHistoryBytes    = "historyBytes"
	fieldContext         = "context"
	fieldProfile         = "profile"
	fieldVoice           = "voice"
	fieldLanguageCode    = "languageCode"
)

// maxIDLen bounds session ids; longer ones are never created by us.
const maxIDLen = 128

// firstEpoch is the epoch of a session's creator.
const firstEpoch = 1

var (
	//go:embed redis_create.lua
	createLua string
	//go:embed redis_resume.lua
	resumeLua string
	//go:embed redis_append.lua
	appendLua string
	//go:embed redis_restore.lua
	restoreLua string
	//go:embed owner_check.lua
	ownerCheckLua string
	//go:embed operator_announce.lua
	operatorAnnounceLua string

	createScript  = newScript(createLua)
	resumeScript  = newScript(resumeLua)
	appendScript  = ownedScript(appendLua)
	restoreScript = newScript(restoreLua)
)

// ownedScript is a script that writes a session's keys as its owner: the
// owner check (owner_check.lua: KEYS[1] the meta hash, ARGV[1] the
// writer's epoch, -1 or -2 when not the owner) runs first.
func ownedScript(body string) *luaScript { return newScript(ownerCheckLua + body) }

// operatorScript is a script of an operator's action on a session, which
// ends with announce (operator_announce.lua): the action's event on the
// timeline and the owners channel told.
func operatorScript(body string) *luaScript { return newScript(operatorAnnounceLua + body) }

// NewRedisStore returns a store on c. It does not contact Redis.
func NewRedisStore(c redis.UniversalClient, o RedisStoreOptions) *RedisStore {
	s := &RedisStore{c: c, ttl: o.SessionTTL, historyMax: o.HistoryMax, historyBytes: o.HistoryMaxBytes,
		timeout: o.RedisTimeout, watchInterval: o.WatchInterval, observe: o.Observe, now: o.Now, waitReplicas: o.RedisWaitReplicas,
		timelineMax: o.TimelineMax, eventsStream: o.EventsStream, eventsMaxLen: int64(o.EventsMaxLen),
		userStorage: int64(o.UserStorageBytes)}
	if s.timelineMax <= 0 {
		s.timelineMax = DefaultTimelineMax
	}
	if s.eventsMaxLen <= 0 {
		s.eventsMaxLen = DefaultEventsMaxLen
	}
	if s.now == nil {
		s.now = clock.Wall.Now
	}
	if s.ttl <= 0 {
		s.ttl = 24 * time.Hour
	}
	if s.historyMax <= 0 {
		s.historyMax = 200
	}
	if s.historyBytes <= 0 {
		s.historyBytes = DefaultHistoryMaxBytes
	}
	if s.timeout <= 0 {
		s.timeout = 500 * time.Millisecond
	}
	if s.watchInterval <= 0 {
		s.watchInterval = time.Second
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
// A call its caller abandoned (ctx cancelled: the connection closed, taken
// over by a resume or shut down) says nothing about Redis and is not
// reported; one that ran out of time is a failure.
func (s *RedisStore) call(ctx context.Context, op metrics.RedisOp, fn func(ctx context.Context) error) error {
	start := clock.Wall.Now()
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err := fn(ctx)
	if errors.Is(err, context.Canceled) && errors.Is(parent.Err(), context.Canceled) {
		return err
	}
	if s.observe != nil {
		failure := err
		if errors.Is(err, ErrResumeRefused) || errors.Is(err, ErrFenced) || errors.Is(err, ErrSessionGone) ||
			errors.Is(err, ErrNotHandedOff) {
			failure = nil
		}
		s.observe(op, clock.Wall.Since(start), failure)
	}
	return err
}

// Create stores rec under rec.ID, refusing an id that exists, and returns
// the record as stored (first epoch, token digest, CreatedAt set to now
// when zero) and a fresh resume token; only its SHA-256 is stored. One
// round trip (a Lua script; the very first call on a server that has not
// cached it costs two).
func (s *RedisStore) Create(ctx context.Context, rec Record) (Record, string, error) {
	var token string
	err := s.call(ctx, metrics.RedisCreate, func(ctx context.Context) error {
		if !validID(rec.ID) {
			return fmt.Errorf("session %q: create: invalid id", rec.ID)
		}
		raw := make([]byte, 32)
		if _, err := rand.Read(raw); err != nil {
			return fmt.Errorf("session %s: create: token: %w", rec.ID, err)
		}
		tok := base64.RawURLEncoding.EncodeToString(raw)
		now := s.now()
		if rec.CreatedAt.IsZero() {
			rec.CreatedAt = now
		}
		rec.Epoch, rec.TokenHash = firstEpoch, HashToken(tok)
		args := []any{s.ttl.Milliseconds()}
		args = append(args, recordFields(rec, now)...)
		args = append(args, fieldTokenHash, rec.TokenHash, fieldEpoch, rec.Epoch, fieldHistoryBytes, 0)
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
		return Record{}, "", err
	}
	return rec, token, nil
}

// Resume takes ownership of the session in one round trip: a Lua script
// checks the token digest and the user, takes the next epoch, refreshes
// both TTLs, publishes the new owner on the owners channel, and returns the
// record and history as of that moment. A refused resume touches nothing
// (so that guessing ids cannot keep foreign sessions alive), and every
// refusal is the same ErrResumeRefused. With a storage quota, a second
// round trip counts the session afresh against it (storage.go).
func (s *RedisStore) Resume(ctx context.Context, id, resumeToken, userID string) (Record, []transport.Entry, error) {
	var (
		rec     Record
		history []transport.Entry
	)
	err := s.call(ctx, metrics.RedisResume, func(ctx context.Context) error {
		refused := fmt.Errorf("session %s: resume: %w", id, ErrResumeRefused)
		if !validID(id) || resumeToken == "" || userID == "" {
			return refused
		}
		res, err := resumeScript.Run(ctx, s.c, []string{metaKey(id), historyKey(id)},
			HashToken(resumeToken), userID, s.ttl.Milliseconds(), ownersChannel, id).Slice()
		if errors.Is(err, redis.Nil) {
			return refused
		}
		if err != nil {
			return fmt.Errorf("session %s: resume: %w", id, err)
		}
		if len(res) != 2 {
			return fmt.Errorf("session %s: resume: unexpected reply of %d parts", id, len(res))
		}
		m, err := pairs(res[0])
		if err != nil {
			return fmt.Errorf("session %s: resume: %w", id, err)
		}
		if rec, err = parseRecord(id, m); err != nil {
			return fmt.Errorf("session %s: resume: %w", id, err)
		}
		raw, err := strs(res[1])
		if err != nil {
			return fmt.Errorf("session %s: resume: %w", id, err)
		}
		if history, err = decodeHistory(raw); err != nil {
			return fmt.Errorf("session %s: resume: %w", id, err)
		}
		bytes, _ := strconv.Atoi(m[fieldHistoryBytes])
		s.recount(ctx, rec, bytes)
		return nil
	})
	if err != nil {
		return Record{}, nil, err
	}
	return rec, history, nil
}

// Load reads a session's record and history without taking ownership or
// refreshing anything, for operators and tests. ErrSessionGone when there
// is no such session.
func (s *RedisStore) Load(ctx context.Context, id string) (Record, []transport.Entry, error) {
	var (
		rec     Record
		history []transport.Entry
	)
	err := s.call(ctx, metrics.RedisLoad, func(ctx context.Context) error {
		var meta *redis.MapStringStringCmd
		var list *redis.StringSliceCmd
		if _, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			meta = p.HGetAll(ctx, metaKey(id))
			list = p.LRange(ctx, historyKey(id), 0, -1)
			return nil
		}); err != nil {
			return fmt.Errorf("session %s: load: %w", id, err)
		}
		if len(meta.Val()) == 0 {
			return fmt.Errorf("session %s: load: %w", id, ErrSessionGone)
		}
		var err error
		if rec, err = parseRecord(id, meta.Val()); err != nil {
			return fmt.Errorf("session %s: load: %w", id, err)
		}
		history, err = decodeHistory(list.Val())
		return err
	})
	return rec, history, err
}

// Append adds entries to the history, keeps the newest within HistoryMax
// and HistoryMaxBytes, records rec's turn and mode and refreshes both TTLs,
// in one round trip (a Lua script that first checks rec's epoch).
func (s *RedisStore) Append(ctx context.Context, rec Record, entries ...transport.Entry) error {
	return s.call(ctx, metrics.RedisAppend, func(ctx context.Context) error {
		sc, n, err := s.appendCall(rec, 0, entries)
		if err != nil {
			return err
		}
		charge, counted := s.chargeCall(rec, chargeAdd, n, false)
		return writeResult(rec.ID, "append", s.runCharged(ctx, sc, charge, counted && n > 0))
	})
}

// Undo takes back the user entry of turn (when it is the last one) and
// writes rec's fields, in one round trip.
func (s *RedisStore) Undo(ctx context.Context, rec Record, turn int) error {
	return s.call(ctx, metrics.RedisAppend, func(ctx context.Context) error {
		sc, _, err := s.appendCall(rec, turn, nil)
		if err != nil {
			return err
		}
		return writeResult(rec.ID, "undo", sc.run(ctx, s.c))
	})
}

// appendCall is the append script with its keys and arguments, and the
// bytes of the entries it appends.
func (s *RedisStore) appendCall(rec Record, undo int, entries []transport.Entry) (scriptCall, int, error) {
	if !validID(rec.ID) {
		return scriptCall{}, 0, fmt.Errorf("session %q: append: invalid id", rec.ID)
	}
	encoded, err := encodeHistory(entries)
	if err != nil {
		return scriptCall{}, 0, fmt.Errorf("session %s: append: %w", rec.ID, err)
	}
	fields := turnFields(rec, s.now())
	args := make([]any, 0, 6+len(fields)+len(encoded))
	args = append(args, rec.Epoch, s.ttl.Milliseconds(), s.historyMax, s.historyBytes, undo, len(fields)/2)
	args = append(args, fields...)
	args = append(args, encoded...)
	return scriptCall{appendScript, []string{metaKey(rec.ID), historyKey(rec.ID)}, args}, encodedBytes(encoded), nil
}

// writeResult turns an append script's reply into the store's errors.
func writeResult(id, op string, cmd *redis.Cmd) error {
	n, err := cmd.Int()
	switch {
	case err != nil:
		return fmt.Errorf("session %s: %s: %w", id, op, err)
	case n == -1:
		return fmt.Errorf("session %s: %s: %w", id, op, ErrSessionGone)
	case n == -2:
		return fmt.Errorf("session %s: %s: %w", id, op, ErrFenced)
	}
	return nil
}

// Restore writes the session back whole in one round trip (a Lua script
// that refuses when a newer epoch owns the session): the record with its
// user, token digest and epoch, the newest HistoryMax entries within
// HistoryMaxBytes, and the pending confirmations that have not expired. It
// reports whether the record was missing.
func (s *RedisStore) Restore(ctx context.Context, rec Record, history []transport.Entry, pending []orchestrator.Confirmation) (bool, error) {
	var restored bool
	err := s.call(ctx, metrics.RedisRestore, func(ctx context.Context) error {
		if !validID(rec.ID) {
			return fmt.Errorf("session %q: restore: invalid id", rec.ID)
		}
		if rec.TokenHash == "" || rec.Epoch < firstEpoch {
			return fmt.Errorf("session %s: restore: the record has no token digest or epoch", rec.ID)
		}
		encoded, err := encodeHistory(history)
		if err != nil {
			return fmt.Errorf("session %s: restore: %w", rec.ID, err)
		}
		encoded, bytes := s.bound(encoded)
		fields := recordFields(rec, s.now())
		fields = append(fields, fieldTokenHash, rec.TokenHash, fieldEpoch, rec.Epoch, fieldHistoryBytes, bytes)
		keys := []string{metaKey(rec.ID), historyKey(rec.ID), confirmsKey(rec.ID)}
		args := []any{rec.Epoch, s.ttl.Milliseconds(), len(fields) / 2}
		args = append(args, fields...)
		now := s.now()
		for _, c := range pending {
			if !c.ExpiresAt.After(now) || c.SessionID != rec.ID {
				continue
			}
			b, err := MarshalJSON(pendingConfirmation{Confirmation: c, ExpiresAtMs: c.ExpiresAt.UnixMilli()})
			if err != nil {
				return fmt.Errorf("session %s: restore: %w", rec.ID, err)
			}
			keys = append(keys, confirmKey(rec.ID, c.Token))
			args = append(args, c.Token, string(b), (c.ExpiresAt.Sub(now) + confirmGrace).Milliseconds())
		}
		args = append(args, encoded...)
		charge, counted := s.chargeCall(rec, chargeSet, bytes, false)
		n, err := s.runCharged(ctx, scriptCall{restoreScript, keys, args}, charge, counted).Int()
		if err != nil {
			return fmt.Errorf("session %s: restore: %w", rec.ID, err)
		}
		if n == -2 {
			return fmt.Errorf("session %s: restore: %w", rec.ID, ErrFenced)
		}
		restored = n == 1
		return nil
	})
	return restored, err
}

// bound keeps the newest encoded entries within HistoryMax and
// HistoryMaxBytes (at least the newest one) and returns them with their
// size.
func (s *RedisStore) bound(encoded []any) ([]any, int) {
	if len(encoded) > s.historyMax {
		encoded = encoded[len(encoded)-s.historyMax:]
	}
	bytes := encodedBytes(encoded)
	for len(encoded) > 1 && bytes > s.historyBytes {
		bytes -= len(encoded[0].(string))
		encoded = encoded[1:]
	}
	return encoded, bytes
}

// Ping reports whether Redis answers within the store timeout.
func (s *RedisStore) Ping(ctx context.Context) error {
	return s.call(ctx, metrics.RedisPing, func(ctx context.Context) error {
		if err := s.c.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("session store: ping: %w", err)
		}
		return nil
	})
}

// HashToken is the digest of a resume token as the store keeps it.
func HashToken(token string) string {
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
	fields := []any{
		fieldUser, rec.UserID,
		fieldMode, string(rec.Mode),
		fieldTurn, strconv.Itoa(rec.Turn),
		fieldRegistryVersion, rec.RegistryVersion,
		fieldCreatedAt, formatTime(createdAt),
		fieldUpdatedAt, formatTime(now),
		fieldPendingMessage, rec.PendingMessage,
		fieldResumeHandle, rec.ResumeHandle,
		fieldHandoff, encodeHandoff(rec.Handoff),
	}
	// What session.start said of the session, only when it said it: most
	// sessions pay nothing for these.
	for _, f := range [...]struct{ name, v string }{{fieldContext, rec.Context}, {fieldProfile, rec.Profile},
		{fieldVoice, rec.Voice}, {fieldLanguageCode, rec.LanguageCode}} {
		if f.v != "" {
			fields = append(fields, f.name, f.v)
		}
	}
	return fields
}

// turnFields are the meta fields a turn changes.
func turnFields(rec Record, now time.Time) []any {
	return []any{fieldTurn, strconv.Itoa(rec.Turn), fieldMode, string(rec.Mode),
		fieldPendingMessage, rec.PendingMessage, fieldResumeHandle, rec.ResumeHandle,
		fieldUpdatedAt, formatTime(now)}
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
	epoch, _ := strconv.ParseInt(m[fieldEpoch], 10, 64)
	return Record{
		Epoch:           epoch,
		TokenHash:       m[fieldTokenHash],
		ID:              id,
		UserID:          m[fieldUser],
		Mode:            protocol.Mode(m[fieldMode]),
		Turn:            turn,
		RegistryVersion: m[fieldRegistryVersion],
		CreatedAt:       created,
		PendingMessage:  m[fieldPendingMessage],
		ResumeHandle:    m[fieldResumeHandle],
		Context:         m[fieldContext],
		Profile:         m[fieldProfile],
		Voice:           m[fieldVoice],
		LanguageCode:    m[fieldLanguageCode],
		Handoff:         parseHandoff(m[fieldHandoff]),
	}, nil
}

// encodeHistory encodes entries as the history keeps them (MarshalJSON),
// on one buffer.
func encodeHistory(entries []transport.Entry) ([]any, error) {
	out := make([]any, 0, len(entries))
	if len(entries) == 0 {
		return out, nil
	}
	enc := jsonEncoders.Get().(*jsonEncoder)
	defer jsonEncoders.Put(enc)
	for i, e := range entries {
		b, err := enc.encode(e)
		if err != nil {
			return nil, fmt.Errorf("encode entry %d: %w", i, err)
		}
		out = append(out, string(b))
	}
	return out, nil
}

// pairs reads a Lua HGETALL reply (field, value, …) as a map.
func pairs(v any) (map[string]string, error) {
	flat, err := strs(v)
	if err != nil || len(flat)%2 != 0 {
		return nil, fmt.Errorf("unexpected meta reply")
	}
	m := make(map[string]string, len(flat)/2)
	for i := 0; i < len(flat); i += 2 {
		m[flat[i]] = flat[i+1]
	}
	return m, nil
}

// strs reads a Lua array of strings.
func strs(v any) ([]string, error) {
	items, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("unexpected reply %T", v)
	}
	out := make([]string, len(items))
	for i, it := range items {
		s, ok := it.(string)
		if !ok {
			return nil, fmt.Errorf("unexpected reply element %T", it)
		}
		out[i] = s
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
