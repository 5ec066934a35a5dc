package store

import (
	"context"
	_ "embed"
	"fmt"
	"time"
)

// A per-user escalating record with expiry, the one primitive under the
// abuse cooldowns (cooldown.go) and the block strikes (Strike): each strike
// is remembered for a while, and repeats within that memory count up.

//go:embed escalate.lua
var escalateLua string

var escalateScript = newScript(escalateLua)

// escalation is how a record escalates: periods from first, doubled for
// each remembered repeat, at most longest; strikes are forgotten memory
// after the period of the latest ends. A zero first only counts strikes.
type escalation struct {
	first, longest, memory time.Duration
}

// escalate records one strike on the record at key, at now, and returns
// when its period ends and how many strikes it remembers (this one
// included). A strike while a period runs changes nothing. One round trip
// (a Lua script); the caller runs it in s.call.
func (s *RedisStore) escalate(ctx context.Context, key string, now time.Time, e escalation) (time.Time, int, error) {
	res, err := escalateScript.Run(ctx, s.c, []string{key}, now.UnixMilli(),
		e.first.Milliseconds(), e.longest.Milliseconds(), e.memory.Milliseconds()).Int64Slice()
	if err != nil {
		return time.Time{}, 0, err
	}
	if len(res) != 2 {
		return time.Time{}, 0, fmt.Errorf("script answered %v", res)
	}
	return time.UnixMilli(res[0]), int(res[1]), nil
}
