package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// A user's storage quota (Redis.UserStorageBytes): the bytes
// of history all of a user's sessions keep, across every node, counted in two
// keys on the user's hash tag (storage_charge.lua):
// turnstile:user:{<user>}:storage, a hash of the bytes counted per session and
// their total, and turnstile:user:{<user>}:storage:expiry, when each
// session's keys expire. Every write of a history counts its bytes there in
// the same round trip; a session is forgotten when its keys expire (its
// count carries the session's TTL, refreshed by the same writes and by a
// resume), so the total follows what Redis holds without a scan. A new
// turn's user entry is refused once the total has no room for it.
//
// The count is the history's JSON (what HistoryMaxBytes bounds), per session
// at most HistoryMaxBytes: an approximation from above of the history (its
// count bound, HistoryMax, can keep it smaller), and it leaves out what is
// bounded per session on its own — the record (~0.4 KB), the call ledger
// (256 calls) and the timeline (TimelineMax entries) — all of which grow
// only with turns, which the quota stops. An entry taken back (a turn refused
// for its rate or a block) stays counted until the session's next resume,
// which counts the session afresh from its record.

//go:embed storage_charge.lua
var chargeLua string

var chargeScript = newScript(chargeLua)

func storageKey(user string) string       { return "turnstile:user:{" + user + "}:storage" }
func storageExpiryKey(user string) string { return "turnstile:user:{" + user + "}:storage:expiry" }

// How a charge counts its bytes.
const (
	chargeAdd = "add" // bytes appended to the session's history
	chargeSet = "set" // the session's whole history (written back, or read at resume)
)

// chargeCall counts n bytes of rec's session against its user's quota;
// refuse makes it refuse an addition the quota has no room for. ok is false
// when no quota is kept.
func (s *RedisStore) chargeCall(rec Record, mode string, n int, refuse bool) (sc scriptCall, ok bool) {
	if s.userStorage <= 0 || rec.UserID == "" {
		return scriptCall{}, false
	}
	r := "0"
	if refuse {
		r = "1"
	}
	return scriptCall{chargeScript, []string{storageKey(rec.UserID), storageExpiryKey(rec.UserID)},
		[]any{s.now().UnixMilli(), s.ttl.Milliseconds(), rec.ID, mode, n, s.historyBytes, s.userStorage, r}}, true
}

// chargeReply reads a charge's reply: whether it was counted, and the
// user's total.
func chargeReply(cmd *redis.Cmd) (counted bool, total int64, err error) {
	v, err := cmd.Int64Slice()
	if err != nil {
		return false, 0, err
	}
	if len(v) != 2 {
		return false, 0, fmt.Errorf("unexpected reply of %d values", len(v))
	}
	return v[0] == 1, v[1], nil
}

// runCharged runs a session write and, when counted, its charge, in one
// round trip, and returns the write's reply. A charge that fails does not
// fail the write: the history is stored, and the count catches up at the
// session's next resume or write-back.
func (s *RedisStore) runCharged(ctx context.Context, write, charge scriptCall, counted bool) *redis.Cmd {
	if !counted {
		return write.run(ctx, s.c)
	}
	var writeCmd, chargeCmd *redis.Cmd
	_, _ = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		writeCmd = write.queue(ctx, p)
		chargeCmd = charge.queue(ctx, p)
		return nil
	})
	_ = charge.settle(ctx, s.c, chargeCmd)
	return write.settle(ctx, s.c, writeCmd)
}

// recount counts a session afresh from its stored history's size, after a
// resume: what was counted for it may have expired or been lost meanwhile.
// A failure is left to the next write.
func (s *RedisStore) recount(ctx context.Context, rec Record, bytes int) {
	if sc, ok := s.chargeCall(rec, chargeSet, bytes, false); ok {
		_ = sc.run(ctx, s.c).Err()
	}
}

// UserStorage returns the bytes of history counted against user's quota
// (0 when no quota is kept or the user has nothing stored), for operators
// and tests.
func (s *RedisStore) UserStorage(ctx context.Context, user string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	n, err := s.c.HGet(ctx, storageKey(user), "total").Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("user %s: storage: %w", user, err)
	}
	return n, nil
}

// encodedBytes is the size of encoded history entries.
func encodedBytes(encoded []any) int {
	n := 0
	for _, e := range encoded {
		n += len(e.(string))
	}
	return n
}
