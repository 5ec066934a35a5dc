package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/transport"
)

// Turns per user: a sliding window kept in a sorted set on the user's hash
// tag, turnstile:user:{<key>}:turns, one member per turn allowed (so it
// never holds more than the limit), expiring with the window.

//go:embed redis_turns.lua
var turnsLua string

var turnsScript = newScript(turnsLua)

// turnsKey is lim's sliding window: turnstile:user:{<key>}:turns, or
// :sessions for the new sessions a user starts; a session's voice starts
// are on the session's tag, turnstile:{<session>}:voice_starts.
func turnsKey(lim TurnLimit) string {
	switch lim.Kind {
	case "":
		return "turnstile:user:{" + lim.Key + "}:turns"
	case KindVoiceStarts, KindLiveConnects:
		return "turnstile:{" + lim.Key + "}:" + lim.Kind
	}
	return "turnstile:user:{" + lim.Key + "}:" + lim.Kind
}

// BeginTurn writes a turn's user entry (as Append, fenced), reads the
// user's block, counts the turn against lim and the entry against the
// user's storage quota, in one round trip: a pipeline of four commands,
// each on one hash tag (the session's, the user's, and the limit key's,
// which in dev mode is not the user's).
func (s *RedisStore) BeginTurn(ctx context.Context, rec Record, user transport.Entry, lim TurnLimit) (TurnStart, error) {
	var ts TurnStart
	err := s.call(ctx, metrics.RedisAppend, func(ctx context.Context) error {
		app, n, err := s.appendCall(rec, 0, []transport.Entry{user})
		if err != nil {
			return err
		}
		k := turnChecks{user: rec.UserID, limited: lim.Max > 0,
			count: scriptCall{turnsScript, []string{turnsKey(lim)}, s.turnArgs(lim, turnMember(rec.ID, rec.Turn))}}
		k.charge, k.counted = s.chargeCall(rec, chargeAdd, n, !lim.QuotaExempt)
		if s.waitReplicas > 0 {
			return s.beginTurnReplicated(ctx, rec, app, &k, &ts)
		}
		var appCmd *redis.Cmd
		_, _ = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			appCmd = app.queue(ctx, p)
			k.queue(ctx, p)
			return nil
		})
		if err := writeResult(rec.ID, "append", app.settle(ctx, s.c, appCmd)); err != nil {
			return err
		}
		return s.turnStart(ctx, rec, &k, &ts)
	})
	return ts, err
}

// turnChecks are what BeginTurn asks beside its write: the user's block,
// the turn limit (when limited) and the storage quota (when counted).
type turnChecks struct {
	user             string
	limited, counted bool
	count, charge    scriptCall

	turnsCmd, chargeCmd *redis.Cmd
	blk                 *redis.StringCmd
}

// queue adds the checks to a pipeline.
func (k *turnChecks) queue(ctx context.Context, p redis.Pipeliner) {
	k.blk = p.Get(ctx, blockKey(k.user))
	if k.limited {
		k.turnsCmd = k.count.queue(ctx, p)
	}
	if k.counted {
		k.chargeCmd = k.charge.queue(ctx, p)
	}
}

// turnStart reads the checks' answers once their pipeline has run.
func (s *RedisStore) turnStart(ctx context.Context, rec Record, k *turnChecks, ts *TurnStart) error {
	var err error
	ts.Block, ts.Allowed = readBlock(k.blk), true
	if k.turnsCmd != nil {
		if ts.Allowed, ts.RetryAfter, err = turnReply(k.count.settle(ctx, s.c, k.turnsCmd)); err != nil {
			return fmt.Errorf("session %s: turn limit: %w", rec.ID, err)
		}
	}
	if k.chargeCmd != nil {
		counted, total, err := chargeReply(k.charge.settle(ctx, s.c, k.chargeCmd))
		if err != nil {
			return fmt.Errorf("session %s: storage quota: %w", rec.ID, err)
		}
		ts.OverQuota, ts.StoredBytes = !counted, total
	}
	return nil
}

// CountTurn counts one turn against lim in one round trip.
func (s *RedisStore) CountTurn(ctx context.Context, lim TurnLimit, member string) (bool, time.Duration, error) {
	if lim.Max <= 0 {
		return true, 0, nil
	}
	var (
		allowed bool
		wait    time.Duration
	)
	err := s.call(ctx, metrics.RedisTurns, func(ctx context.Context) error {
		cmd := turnsScript.Run(ctx, s.c, []string{turnsKey(lim)}, s.turnArgs(lim, member)...)
		var err error
		if allowed, wait, err = turnReply(cmd); err != nil {
			return fmt.Errorf("turn limit: %w", err)
		}
		return nil
	})
	return allowed, wait, err
}

func (s *RedisStore) turnArgs(lim TurnLimit, member string) []any {
	window := lim.Window
	if window <= 0 {
		window = time.Minute
	}
	return []any{s.now().UnixMilli(), window.Milliseconds(), lim.Max, member}
}

func turnMember(id string, turn int) string { return id + ":" + strconv.Itoa(turn) }

func turnReply(cmd *redis.Cmd) (bool, time.Duration, error) {
	v, err := cmd.Int64Slice()
	if err != nil {
		return false, 0, err
	}
	if len(v) != 2 {
		return false, 0, fmt.Errorf("unexpected reply of %d values", len(v))
	}
	return v[0] == 1, time.Duration(v[1]) * time.Millisecond, nil
}

// beginTurnReplicated is BeginTurn for a store that must not acknowledge a
// user message before WaitReplicas replicas have it: the write goes on a
// connection of its own to the session's master, followed there by WAIT
// (which covers only that connection's writes); the user's keys, which on
// a Cluster live on another master, are read in a second round trip.
func (s *RedisStore) beginTurnReplicated(ctx context.Context, rec Record, app scriptCall, k *turnChecks, ts *TurnStart) error {
	master, err := s.masterFor(ctx, metaKey(rec.ID))
	if err != nil {
		return fmt.Errorf("session %s: append: %w", rec.ID, err)
	}
	conn := master.Conn()
	defer func() { _ = conn.Close() }()
	if err := writeResult(rec.ID, "append", app.run(ctx, conn)); err != nil {
		return err
	}
	if err := s.waitFor(ctx, conn); err != nil {
		return fmt.Errorf("session %s: append: %w", rec.ID, err)
	}
	_, _ = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		k.queue(ctx, p)
		return nil
	})
	return s.turnStart(ctx, rec, k, ts)
}

// masterFor is the client of the master that holds key: the one master of
// a single or sentinel setup, the key's slot owner on a Cluster.
func (s *RedisStore) masterFor(ctx context.Context, key string) (*redis.Client, error) {
	switch c := s.c.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	}
	return nil, fmt.Errorf("WAIT needs a single, sentinel or cluster client, not %T", s.c)
}

// ErrNotReplicated means fewer replicas than WaitReplicas acknowledged a
// write in time: it may be lost in a failover, so it is not confirmed.
var ErrNotReplicated = errors.New("write not acknowledged by enough replicas")

// waitFor waits, within the call's deadline, until WaitReplicas replicas
// have every write conn made.
func (s *RedisStore) waitFor(ctx context.Context, conn *redis.Conn) error {
	timeout := s.timeout
	if d, ok := ctx.Deadline(); ok {
		timeout = clock.Wall.Until(d) / 2 // leave the other half for the reply
	}
	n, err := conn.Wait(ctx, s.waitReplicas, max(timeout, time.Millisecond)).Result()
	switch {
	case err != nil:
		return err
	case int(n) < s.waitReplicas:
		return fmt.Errorf("%w: %d of %d", ErrNotReplicated, n, s.waitReplicas)
	}
	return nil
}
