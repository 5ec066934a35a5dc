package store

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/transport"
)

// What the per-user storage quota adds to a turn's start (BeginTurn: the
// user entry, the block read, the turn limit and, on, the quota's script,
// one pipeline), against a real redis-server on loopback: off and on.
func BenchmarkBeginTurnStorageQuota(b *testing.B) {
	c, err := NewRedisClient("redis://"+redistest.Start(b), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	entry := transport.Entry{Role: transport.RoleUser, Text: strings.Repeat("how long does shipping take? ", 10)}
	runs := 0 // each run of a sub-benchmark starts a session of its own
	for _, bc := range []struct {
		name  string
		quota int
	}{{"off", 0}, {"on", 1 << 40}} {
		b.Run(bc.name, func(b *testing.B) {
			s := NewRedisStore(c, RedisStoreOptions{Redis: Redis{UserStorageBytes: bc.quota}})
			ctx := context.Background()
			runs++
			rec, _, err := s.Create(ctx, Record{ID: "s-bench-" + strconv.Itoa(runs), UserID: "alice", Mode: "text"})
			if err != nil {
				b.Fatal(err)
			}
			lim := TurnLimit{Key: "alice", Max: 1 << 30, Window: time.Minute}
			b.ReportAllocs()
			for b.Loop() {
				rec.Turn++
				entry.Turn = rec.Turn
				if ts, err := s.BeginTurn(ctx, rec, entry, lim); err != nil || !ts.Allowed || ts.OverQuota {
					b.Fatal(ts, err)
				}
			}
		})
	}
}
