package store

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/metrics"
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

//go:embed block_set.lua
var blockSetLua string

var blockSetScript = newScript(blockSetLua)

// storedBlock is a block as Redis holds it: its end in milliseconds too,
// so that the block script compares ends without parsing dates.
type storedBlock struct {
	Block
	UntilMs int64 `json:"untilMs"`
}

func encodeBlock(b Block) []byte {
	raw, _ := json.Marshal(storedBlock{Block: b, UntilMs: b.Until.UnixMilli()})
	return raw
}

// announcedBlock is a block set as the owners channel carries it
// ("blocked <JSON>", blockAnnouncement): the user and the block, so that
// no node that hears it reads the block back.
type announcedBlock struct {
	User string `json:"user"`
	Block
}

// blockAnnouncement is the owners channel's message for user's block b,
// set (announce passes it to Watcher.BlockChanged). A node of an earlier
// version announced "block <user>" only, and its hearers read the block;
// it ignores this message (it hears the block at the session's next store
// write).
func blockAnnouncement(user string, b Block) string {
	raw, _ := json.Marshal(announcedBlock{User: user, Block: b})
	return "blocked " + string(raw)
}

// BlockUser blocks a user on every session and node until b.Until, and
// tells every node at once (Watcher's BlockChanged), so that a session of
// the user on another node refuses its next input before any model request
// rather than at its next store write. A block never shortens an existing
// longer one, even when two are set at once (one round trip, a Lua script
// that compares and sets).
func (s *RedisStore) BlockUser(ctx context.Context, user string, b Block) error {
	return s.call(ctx, metrics.RedisBlock, func(ctx context.Context) error {
		err := blockSetScript.Run(ctx, s.c, []string{blockKey(user)},
			b.Until.UnixMilli(), encodeBlock(b), s.now().UnixMilli(), ownersChannel, blockAnnouncement(user, b)).Err()
		if err != nil {
			return fmt.Errorf("user block: %w", err)
		}
		return nil
	})
}

// Strike implements Store.Strike in one round trip: the strikes are an
// escalating record (escalate.go) that only counts, each strike remembered
// for memory after the latest.
func (s *RedisStore) Strike(ctx context.Context, user string, memory time.Duration) (int, error) {
	var n int
	err := s.call(ctx, metrics.RedisBlock, func(ctx context.Context) error {
		var err error
		if _, n, err = s.escalate(ctx, strikesKey(user), s.now(), escalation{memory: memory}); err != nil {
			return fmt.Errorf("user strikes: %w", err)
		}
		return nil
	})
	return n, err
}

// BlockOf returns the user's block; a zero Until means not blocked.
func (s *RedisStore) BlockOf(ctx context.Context, user string) (Block, error) {
	var b Block
	err := s.call(ctx, metrics.RedisBlock, func(ctx context.Context) error {
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
