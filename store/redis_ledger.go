package store

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/orchestrator"
)

// The orchestrator's call ledger, kept in the same Redis as the sessions.
// Its keys share the session's hash tag, and its writes are fenced on the
// session's epoch like the session's own.

var _ orchestrator.LedgerStore = (*RedisStore)(nil)

// ledgerMax bounds how many calls the ledger of one session keeps (the
// oldest are forgotten first); each holds the response the model was sent.
const ledgerMax = 256

//go:embed ledger_claim.lua
var claimLua string

//go:embed ledger_answer.lua
var answerLua string

//go:embed ledger_succeeded.lua
var succeededLua string

var (
	claimScript  = ownedScript(claimLua)
	answerScript = ownedScript(answerLua)
	// Read-only: no owner check.
	succeededScript = newScript(succeededLua)
)

func callsKey(id string) string   { return "turnstile:{" + id + "}:calls" }
func callIDsKey(id string) string { return "turnstile:{" + id + "}:callids" }

// Claim implements orchestrator.LedgerStore in one round trip, fenced on
// epoch (a Lua script that first compares it, as Append's).
func (s *RedisStore) Claim(ctx context.Context, sessionID string, epoch int64, calls []orchestrator.CallRecord) (map[string]orchestrator.CallRecord, error) {
	prior := map[string]orchestrator.CallRecord{}
	err := s.call(ctx, metrics.RedisLedger, func(ctx context.Context) error {
		args := []any{epoch, s.ttl.Milliseconds(), ledgerMax}
		for _, c := range calls {
			b, err := MarshalJSON(c)
			if err != nil {
				return fmt.Errorf("session %s: ledger claim: %w", sessionID, err)
			}
			args = append(args, c.ID, b)
		}
		res, err := claimScript.Run(ctx, s.c, []string{metaKey(sessionID), callsKey(sessionID), callIDsKey(sessionID)},
			args...).Result()
		if err != nil {
			return fmt.Errorf("session %s: ledger claim: %w", sessionID, err)
		}
		if n, refused := res.(int64); refused {
			return refusal(sessionID, "ledger claim", n)
		}
		got, ok := res.([]any)
		if !ok {
			return fmt.Errorf("session %s: ledger claim: unexpected reply %T", sessionID, res)
		}
		for i, v := range got {
			raw, _ := v.(string)
			if raw == "" || i >= len(calls) {
				continue
			}
			var rec orchestrator.CallRecord
			if err := json.Unmarshal([]byte(raw), &rec); err != nil {
				return fmt.Errorf("session %s: ledger claim: call %s: %w", sessionID, calls[i].ID, err)
			}
			prior[calls[i].ID] = rec
		}
		return nil
	})
	return prior, err
}

// refusal is the error of a ledger or confirmation script that wrote
// nothing: -2 another connection owns the session (ErrFenced), -1 its
// record is gone or stale (ErrSessionGone), as the append script's.
func refusal(id, op string, n int64) error {
	switch n {
	case -2:
		return fmt.Errorf("session %s: %s: %w", id, op, ErrFenced)
	case -1:
		return fmt.Errorf("session %s: %s: %w", id, op, ErrSessionGone)
	}
	return fmt.Errorf("session %s: %s: unexpected reply %d", id, op, n)
}

// Answer implements orchestrator.LedgerStore in one round trip, fenced on
// epoch.
func (s *RedisStore) Answer(ctx context.Context, sessionID string, epoch int64, calls []orchestrator.CallRecord) error {
	return s.call(ctx, metrics.RedisLedger, func(ctx context.Context) error {
		args := []any{epoch, s.ttl.Milliseconds()}
		for _, c := range calls {
			b, err := MarshalJSON(c)
			if err != nil {
				return fmt.Errorf("session %s: ledger answer: %w", sessionID, err)
			}
			key := ""
			if c.Outcome == "ok" {
				key = c.IdempotencyKey
			}
			args = append(args, c.ID, b, key)
		}
		n, err := answerScript.Run(ctx, s.c, []string{metaKey(sessionID), callsKey(sessionID), callIDsKey(sessionID)},
			args...).Int64()
		if err != nil {
			return fmt.Errorf("session %s: ledger answer: %w", sessionID, err)
		}
		if n != 1 {
			return refusal(sessionID, "ledger answer", n)
		}
		return nil
	})
}

// Succeeded implements orchestrator.LedgerStore in one round trip.
func (s *RedisStore) Succeeded(ctx context.Context, sessionID, key string) (orchestrator.CallRecord, bool, error) {
	var rec orchestrator.CallRecord
	var found bool
	err := s.call(ctx, metrics.RedisLedger, func(ctx context.Context) error {
		raw, err := succeededScript.Run(ctx, s.c, []string{callsKey(sessionID)}, key).Text()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("session %s: ledger succeeded: %w", sessionID, err)
		}
		if err := json.Unmarshal([]byte(raw), &rec); err != nil {
			return fmt.Errorf("session %s: ledger succeeded: %w", sessionID, err)
		}
		found = true
		return nil
	})
	return rec, found, err
}

// Ledger returns the session's call records, oldest first (for tests and
// operators).
func (s *RedisStore) Ledger(ctx context.Context, sessionID string) ([]orchestrator.CallRecord, error) {
	var out []orchestrator.CallRecord
	err := s.call(ctx, metrics.RedisLedger, func(ctx context.Context) error {
		all, err := s.c.LRange(ctx, callIDsKey(sessionID), 0, -1).Result()
		if err != nil {
			return err
		}
		ids := all[:0]
		for _, id := range all {
			if !strings.HasPrefix(id, "k:") { // an idempotency key's success, not a call
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		vals, err := s.c.HMGet(ctx, callsKey(sessionID), ids...).Result()
		if err != nil {
			return fmt.Errorf("session %s: ledger: %w", sessionID, err)
		}
		for _, v := range vals {
			str, ok := v.(string)
			if !ok {
				continue
			}
			var rec orchestrator.CallRecord
			if err := json.Unmarshal([]byte(str), &rec); err != nil {
				return fmt.Errorf("session %s: ledger: %w", sessionID, err)
			}
			out = append(out, rec)
		}
		return nil
	})
	return out, err
}
