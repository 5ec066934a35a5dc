package store

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/transport"
)

// The orchestrator's ledger and confirmations, and user blocks, kept in the
// same Redis as the sessions. Ledger and confirmation keys share the
// session's hash tag, and their writes are fenced on the session's epoch
// like the session's own; a block is keyed by the user.

var (
	_ orchestrator.LedgerStore  = (*RedisStore)(nil)
	_ orchestrator.ConfirmStore = (*RedisStore)(nil)
)

// ledgerMax bounds how many calls the ledger of one session keeps (the
// oldest are forgotten first); each holds the response the model was sent.
const ledgerMax = 256

// confirmGrace keeps an expired confirmation readable for a while, so that
// a late answer is told "expired" rather than "unknown".
const confirmGrace = 10 * time.Minute

//go:embed redis_confirm.lua
var confirmLua string

//go:embed redis_resolve.lua
var resolveLua string

//go:embed ledger_claim.lua
var claimLua string

//go:embed ledger_answer.lua
var answerLua string

//go:embed ledger_succeeded.lua
var succeededLua string

var (
	confirmScript = ownedScript(confirmLua)
	resolveScript = ownedScript(resolveLua)
	claimScript   = ownedScript(claimLua)
	answerScript  = ownedScript(answerLua)
	// Read-only: no owner check.
	succeededScript = redis.NewScript(succeededLua)
)

// pendingConfirmation is a stored confirmation; the expiry in milliseconds
// lets the resolve script compare it without parsing dates.
type pendingConfirmation struct {
	orchestrator.Confirmation
	ExpiresAtMs int64 `json:"expiresAtMs"`
}

func callsKey(id string) string    { return "turnstile:{" + id + "}:calls" }
func callIDsKey(id string) string  { return "turnstile:{" + id + "}:callids" }
func confirmsKey(id string) string { return "turnstile:{" + id + "}:confirms" }
func confirmKey(id, token string) string {
	return "turnstile:{" + id + "}:confirm:" + token
}
func approvalKey(id, tool, digest string) string {
	return "turnstile:{" + id + "}:approved:" + tool + ":" + digest
}
func blockKey(user string) string { return "turnstile:user:{" + user + "}:block" }

// strikesKey counts a user's model-imposed blocks for escalation; it
// shares the block's hash tag, so an operator's lift clears both at once.
func strikesKey(user string) string { return "turnstile:user:{" + user + "}:strikes" }

// Claim implements orchestrator.LedgerStore in one round trip, fenced on
// epoch (a Lua script that first compares it, as Append's).
func (s *RedisStore) Claim(ctx context.Context, sessionID string, epoch int64, calls []orchestrator.CallRecord) (map[string]orchestrator.CallRecord, error) {
	prior := map[string]orchestrator.CallRecord{}
	err := s.call(ctx, "ledger", func(ctx context.Context) error {
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
	return s.call(ctx, "ledger", func(ctx context.Context) error {
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
	err := s.call(ctx, "ledger", func(ctx context.Context) error {
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
	err := s.call(ctx, "ledger", func(ctx context.Context) error {
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

// ConsumeOrRequest implements orchestrator.ConfirmStore in one round trip,
// fenced on c.Epoch.
func (s *RedisStore) ConsumeOrRequest(ctx context.Context, c orchestrator.Confirmation) (bool, string, error) {
	var approved bool
	var key string
	err := s.call(ctx, "confirm", func(ctx context.Context) error {
		b, err := MarshalJSON(pendingConfirmation{Confirmation: c, ExpiresAtMs: c.ExpiresAt.UnixMilli()})
		if err != nil {
			return fmt.Errorf("session %s: confirm: %w", c.SessionID, err)
		}
		ttl := c.ExpiresAt.Sub(s.now()) + confirmGrace
		res, err := confirmScript.Run(ctx, s.c,
			[]string{metaKey(c.SessionID), approvalKey(c.SessionID, c.Tool, c.ArgsDigest), confirmKey(c.SessionID, c.Token),
				confirmsKey(c.SessionID)},
			c.Epoch, c.UserID, b, ttl.Milliseconds(), c.Token).Result()
		if err != nil {
			return fmt.Errorf("session %s: confirm: %w", c.SessionID, err)
		}
		if n, refused := res.(int64); refused {
			return refusal(c.SessionID, "confirm", n)
		}
		pair, _ := res.([]any)
		if len(pair) != 2 {
			return fmt.Errorf("session %s: confirm: unexpected reply %T", c.SessionID, res)
		}
		n, _ := pair[0].(int64)
		approved = n == 1
		key, _ = pair[1].(string)
		return nil
	})
	return approved, key, err
}

// Resolve implements orchestrator.ConfirmStore in one round trip: a Lua
// script checks that epoch owns the session and that the confirmation is
// this user's before it takes it (so nobody else can consume or destroy
// it), deletes it so that an answer is used once even when two arrive
// together, and stores the approval for exactly this tool and argument
// digest.
func (s *RedisStore) Resolve(ctx context.Context, sessionID string, epoch int64, userID, token string, approve bool, ttl time.Duration) (orchestrator.Confirmation, error) {
	var c orchestrator.Confirmation
	err := s.call(ctx, "confirm", func(ctx context.Context) error {
		flag := "0"
		if approve {
			flag = "1"
		}
		res, err := resolveScript.Run(ctx, s.c, []string{metaKey(sessionID), confirmKey(sessionID, token), confirmsKey(sessionID)},
			epoch, userID, token, flag, s.now().UnixMilli(), ttl.Milliseconds(), "turnstile:{"+sessionID+"}:approved:").Result()
		if err != nil {
			return fmt.Errorf("session %s: confirm: %w", sessionID, err)
		}
		if n, ok := res.(int64); ok {
			return refusal(sessionID, "confirm", n)
		}
		pair, _ := res.([]any)
		if len(pair) != 2 || pair[0] == "unknown" {
			return orchestrator.ErrConfirmUnknown
		}
		status, raw := pair[0], fmt.Sprint(pair[1])
		var p pendingConfirmation
		if err := json.Unmarshal([]byte(raw), &p); err != nil {
			return fmt.Errorf("session %s: confirm: %w", sessionID, err)
		}
		c = p.Confirmation
		if status == "expired" {
			return orchestrator.ErrConfirmExpired
		}
		return nil
	})
	return c, err
}

// Pending implements orchestrator.ConfirmStore: confirmations of the
// session that are not answered and not expired.
func (s *RedisStore) Pending(ctx context.Context, sessionID string) ([]orchestrator.Confirmation, error) {
	var out []orchestrator.Confirmation
	err := s.call(ctx, "confirm", func(ctx context.Context) error {
		tokens, err := s.c.SMembers(ctx, confirmsKey(sessionID)).Result()
		if err != nil || len(tokens) == 0 {
			return err
		}
		keys := make([]string, len(tokens))
		for i, t := range tokens {
			keys[i] = confirmKey(sessionID, t)
		}
		vals, err := s.c.MGet(ctx, keys...).Result()
		if err != nil {
			return fmt.Errorf("session %s: pending confirmations: %w", sessionID, err)
		}
		now := s.now()
		for _, v := range vals {
			str, ok := v.(string)
			if !ok {
				continue
			}
			var p pendingConfirmation
			if json.Unmarshal([]byte(str), &p) == nil && now.Before(p.ExpiresAt) {
				out = append(out, p.Confirmation)
			}
		}
		return nil
	})
	return out, err
}

// Block is a user's block (ignore_user).
type Block struct {
	Until  time.Time `json:"until"`
	Reason string    `json:"reason,omitempty"`
}

// BlockUser blocks a user on every session and node until b.Until. A block
// never shortens an existing longer one.
func (s *RedisStore) BlockUser(ctx context.Context, user string, b Block) error {
	return s.call(ctx, "block", func(ctx context.Context) error {
		cur, err := s.blockOf(ctx, user)
		if err != nil {
			return err
		}
		if cur.Until.After(b.Until) {
			return nil
		}
		raw, _ := json.Marshal(b)
		if err := s.c.Set(ctx, blockKey(user), raw, b.Until.Sub(s.now())).Err(); err != nil {
			return fmt.Errorf("user block: %w", err)
		}
		return nil
	})
}

// Strike implements Store.Strike in one round trip: the count's key
// lives for memory after the latest strike.
func (s *RedisStore) Strike(ctx context.Context, user string, memory time.Duration) (int, error) {
	var n int64
	err := s.call(ctx, "block", func(ctx context.Context) error {
		var incr *redis.IntCmd
		_, err := s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			incr = p.Incr(ctx, strikesKey(user))
			p.Expire(ctx, strikesKey(user), memory)
			return nil
		})
		if err != nil {
			return fmt.Errorf("user strikes: %w", err)
		}
		n = incr.Val()
		return nil
	})
	return int(n), err
}

// BlockOf returns the user's block; a zero Until means not blocked.
func (s *RedisStore) BlockOf(ctx context.Context, user string) (Block, error) {
	var b Block
	err := s.call(ctx, "block", func(ctx context.Context) error {
		var err error
		b, err = s.blockOf(ctx, user)
		return err
	})
	return b, err
}

func (s *RedisStore) blockOf(ctx context.Context, user string) (Block, error) {
	raw, err := s.c.Get(ctx, blockKey(user)).Result()
	if errors.Is(err, redis.Nil) {
		return Block{}, nil
	}
	if err != nil {
		return Block{}, fmt.Errorf("user block: %w", err)
	}
	var b Block
	if err := json.Unmarshal([]byte(raw), &b); err != nil {
		return Block{}, fmt.Errorf("user block: %w", err)
	}
	return b, nil
}

// AppendWithBlock is Append that also reads the user's block in the same
// round trip (a pipeline: the block key lives on another hash tag), so that
// a block set on another node stops the next turn, or a running voice
// session at its next turn's end.
func (s *RedisStore) AppendWithBlock(ctx context.Context, rec Record, entries ...transport.Entry) (Block, error) {
	return s.EndTurn(ctx, rec, TurnEnd{Entries: entries})
}

// readBlock reads a block from a GET queued on a pipeline; a missing or
// unreadable one is no block.
func readBlock(cmd *redis.StringCmd) Block {
	var b Block
	if raw, err := cmd.Result(); err == nil {
		_ = json.Unmarshal([]byte(raw), &b)
	}
	return b
}
