package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/transport"
)

// User blocks (ignore_user) and the strikes that escalate them, keyed by
// the user: every session and node of the user sees them.

func blockKey(user string) string { return "turnstile:user:{" + user + "}:block" }

// strikesKey counts a user's model-imposed blocks for escalation; it
// shares the block's hash tag, so an operator's lift clears both at once.
func strikesKey(user string) string { return "turnstile:user:{" + user + "}:strikes" }

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
