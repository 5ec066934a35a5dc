package store

import (
	"context"
	"crypto/sha1"
	"encoding/hex"

	"github.com/redis/go-redis/v9"
)

// The store's Lua scripts write, and most of them are not idempotent: run
// twice, an append stores its entries twice, a ledger claim finds its own
// claim and reports the call as claimed before, a confirmation's
// resolution finds its approval consumed, a counter counts twice. go-redis
// sends a failed command again (MaxRetries, client.go) — after a read
// timeout or a connection lost too, when the first may have run in Redis
// and only its reply was lost. So every script call here is sent as a
// command go-redis must not send again (NoRetry; a pipeline holding one is
// not retried either): a failure is the caller's to handle (a session goes
// on from memory and catches the store up; a limit or a lease fails open),
// never a second execution. EVAL after NOSCRIPT is not such a repeat: the
// script did not run.

// luaScript is a script's source and its SHA-1, the name EVALSHA runs it
// by.
type luaScript struct{ src, hash string }

func newScript(src string) *luaScript {
	sum := sha1.Sum([]byte(src))
	return &luaScript{src: src, hash: hex.EncodeToString(sum[:])}
}

// Run runs the script alone on c, sent once (scriptCall.run).
func (l *luaScript) Run(ctx context.Context, c processor, keys []string, args ...any) *redis.Cmd {
	return scriptCall{l, keys, args}.run(ctx, c)
}

// scriptCall is one Lua script call, to run alone or on a pipeline.
type scriptCall struct {
	script *luaScript
	keys   []string
	args   []any
}

// processor sends one command: a client, a connection or a pipeline.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// onceCmd is a command go-redis does not send again after a failure.
type onceCmd struct{ *redis.Cmd }

// NoRetry tells go-redis not to retry the command.
func (onceCmd) NoRetry() bool { return true }

// once is the command args (its key first, after the command's name),
// to be sent once: for a write whose second run would answer differently
// (a SET NX finding its own key, a DEL finding nothing, an XADD adding a
// second record).
func once(ctx context.Context, args ...any) onceCmd {
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(1) // a Cluster client routes it by its key
	return onceCmd{cmd}
}

// evalCmd is sc as EVALSHA (sha) or EVAL (the script's source), sent once.
func (sc scriptCall) evalCmd(ctx context.Context, name, script string) onceCmd {
	args := make([]any, 0, 3+len(sc.keys)+len(sc.args))
	args = append(args, name, script, len(sc.keys))
	for _, k := range sc.keys {
		args = append(args, k)
	}
	args = append(args, sc.args...)
	cmd := once(ctx, args...)
	cmd.SetFirstKeyPos(3) // its first key
	return cmd
}

// run runs the call alone (EVALSHA, then EVAL if Redis does not know the
// script), each sent once.
func (sc scriptCall) run(ctx context.Context, c processor) *redis.Cmd {
	cmd := sc.evalCmd(ctx, "evalsha", sc.script.hash)
	_ = c.Process(ctx, cmd)
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd = sc.evalCmd(ctx, "eval", sc.script.src)
		_ = c.Process(ctx, cmd)
	}
	return cmd.Cmd
}

// queue adds the call to a pipeline as EVALSHA; settle runs it again after
// the pipeline if Redis did not know the script (a Redis that restarted
// forgets them), which a pipeline cannot do by itself.
func (sc scriptCall) queue(ctx context.Context, p redis.Pipeliner) *redis.Cmd {
	cmd := sc.evalCmd(ctx, "evalsha", sc.script.hash)
	_ = p.Process(ctx, cmd)
	return cmd.Cmd
}

func (sc scriptCall) settle(ctx context.Context, c processor, cmd *redis.Cmd) *redis.Cmd {
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		return sc.run(ctx, c)
	}
	return cmd
}
