package store

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"time"

	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/orchestrator"
)

// The orchestrator's confirmations, kept in the same Redis as the sessions.
// Their keys share the session's hash tag, and their writes are fenced on
// the session's epoch like the session's own.

var _ orchestrator.ConfirmStore = (*RedisStore)(nil)

// confirmGrace keeps an expired confirmation readable for a while, so that
// a late answer is told "expired" rather than "unknown".
const confirmGrace = 10 * time.Minute

//go:embed redis_confirm.lua
var confirmLua string

//go:embed redis_resolve.lua
var resolveLua string

//go:embed redis_revoke.lua
var revokeLua string

var (
	confirmScript = ownedScript(confirmLua)
	resolveScript = ownedScript(resolveLua)
	revokeScript  = ownedScript(revokeLua)
)

// pendingConfirmation is a stored confirmation; the expiry in milliseconds
// lets the resolve script compare it without parsing dates.
type pendingConfirmation struct {
	orchestrator.Confirmation
	ExpiresAtMs int64 `json:"expiresAtMs"`
}

func confirmsKey(id string) string { return "turnstile:{" + id + "}:confirms" }
func confirmKey(id, token string) string {
	return "turnstile:{" + id + "}:confirm:" + token
}
func approvalKey(id, tool, digest string) string {
	return "turnstile:{" + id + "}:approved:" + tool + ":" + digest
}

// ConsumeOrRequest implements orchestrator.ConfirmStore in one round trip,
// fenced on c.Epoch.
func (s *RedisStore) ConsumeOrRequest(ctx context.Context, c orchestrator.Confirmation) (bool, string, error) {
	var approved bool
	var key string
	err := s.call(ctx, metrics.RedisConfirm, func(ctx context.Context) error {
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
	err := s.call(ctx, metrics.RedisConfirm, func(ctx context.Context) error {
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

// Revoke implements orchestrator.ConfirmStore in one round trip, fenced on
// epoch: the user's unused approval of exactly this call is withdrawn.
func (s *RedisStore) Revoke(ctx context.Context, sessionID string, epoch int64, userID, tool, argsDigest string) error {
	return s.call(ctx, metrics.RedisConfirm, func(ctx context.Context) error {
		n, err := revokeScript.Run(ctx, s.c, []string{metaKey(sessionID), approvalKey(sessionID, tool, argsDigest)},
			epoch, userID).Int64()
		if err != nil {
			return fmt.Errorf("session %s: revoke approval: %w", sessionID, err)
		}
		if n < 0 {
			return refusal(sessionID, "revoke approval", n)
		}
		return nil
	})
}

// Pending implements orchestrator.ConfirmStore: confirmations of the
// session that are not answered and not expired.
func (s *RedisStore) Pending(ctx context.Context, sessionID string) ([]orchestrator.Confirmation, error) {
	var out []orchestrator.Confirmation
	err := s.call(ctx, metrics.RedisConfirm, func(ctx context.Context) error {
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
