package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// supportQuestions are questions the offline demo model answers from the
// sample knowledge base with kb_search and then kb_get: every turn stores
// two tool calls and their full results, as a support chat does.
var supportQuestions = []string{
	"How long does shipping take?", "How do refunds work?", "Which payment methods do you take?",
	"Can I buy a gift card?", "Is my grinder under warranty?", "When is the shop open?",
	"How do subscriptions work?", "Do you sell wholesale?", "Which allergens are in the beans?",
	"How should I brew a pour-over?",
}

// keyUsage is what Redis says about one key.
type keyUsage struct {
	key   string
	typ   string
	bytes int64
	items int64 // list length or hash fields; 0 for a string
	ttl   time.Duration
}

// sessionKeys lists the keys of Redis with their memory use (MEMORY USAGE,
// all samples), type, length and TTL.
func sessionKeys(t *testing.T, rdb *redis.Client) []keyUsage {
	t.Helper()
	ctx := t.Context()
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(keys)
	var out []keyUsage
	for _, k := range keys {
		u := keyUsage{key: k}
		u.bytes, err = rdb.MemoryUsage(ctx, k, 0).Result()
		if errors.Is(err, redis.Nil) {
			continue // gone since KEYS: the live-session holder key is removed when the connection ends
		}
		if err != nil {
			t.Fatal(err)
		}
		u.typ = rdb.Type(ctx, k).Val()
		switch u.typ {
		case "list":
			u.items = rdb.LLen(ctx, k).Val()
		case "hash":
			u.items = rdb.HLen(ctx, k).Val()
		case "set":
			u.items = rdb.SCard(ctx, k).Val()
		}
		u.ttl = rdb.PTTL(ctx, k).Val()
		if u.ttl == -2 { // go-redis's "no such key": gone since KEYS, as above
			continue
		}
		out = append(out, u)
	}
	return out
}

// TestRedisFootprintOfASupportConversation runs support conversations
// through a gateway on a real redis-server and checks what they leave
// there: every key expires, the history and the call ledger stay within
// their bounds. It logs each key's MEMORY USAGE and redis-cli --bigkeys:
// docs/operations.md quotes these figures ("Redis sizing").
func TestRedisFootprintOfASupportConversation(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 140 turns")
	}
	addr := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	cfg := unlimited(defaultTestConfig(t)) // 140 turns in a few seconds
	cfg.RedisURL = gateway.SecretURL("redis://" + addr)
	// Each run flushes Redis: without this, the node would write the
	// previous run's session back from its recent copies (as it should
	// after a flush), and the footprint would be two sessions'.
	cfg.RecentSessionsBytes = 0
	g := startGatewayWith(t, cfg, brains{text: fakegemini.NewDemo()})

	for _, turns := range []int{10, 130} {
		t.Run(fmt.Sprintf("%d turns", turns), func(t *testing.T) {
			if err := rdb.FlushAll(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			c := g.dial("", nil)
			c.start(nil)
			for i := range turns {
				evs := c.ask(supportQuestions[i%len(supportQuestions)])
				if res := ofType(evs, "tool.result"); len(res) != 2 || last(evs).str("reason") != "end_turn" {
					t.Fatalf("turn %d: %d tool results, end %v", i+1, len(res), last(evs))
				}
			}
			_ = c.c.CloseNow()
			testwait.For(t, "the session's writes", func() bool {
				return rdb.LLen(context.Background(), "turnstile:{"+sessionID(t, rdb)+"}:history").Val() >=
					int64(min(cfg.HistoryMax, 6*turns))
			})

			var total int64
			var lines []string
			for _, u := range sessionKeys(t, rdb) {
				total += u.bytes
				lines = append(lines, fmt.Sprintf("%-48s %-5s %4d items %8d bytes ttl %v", u.key, u.typ, u.items, u.bytes,
					u.ttl.Round(time.Second)))
				if u.ttl <= 0 || u.ttl > cfg.SessionTTL {
					t.Errorf("%s: TTL %v, want (0, %v]", u.key, u.ttl, cfg.SessionTTL)
				}
				switch {
				case strings.HasSuffix(u.key, ":history") && u.items > int64(cfg.HistoryMax):
					t.Errorf("%s holds %d entries, more than TURNSTILE_HISTORY_MAX=%d", u.key, u.items, cfg.HistoryMax)
				case (strings.HasSuffix(u.key, ":calls") || strings.HasSuffix(u.key, ":callids")) && u.items > 256:
					t.Errorf("%s holds %d calls, more than the ledger's 256", u.key, u.items)
				}
			}
			t.Logf("after %d turns (%d tool calls): %d bytes in Redis (MEMORY USAGE, summed)\n%s", turns, 2*turns, total,
				strings.Join(lines, "\n"))
			if out, err := exec.Command("redis-cli", "-h", "127.0.0.1", "-p", strings.Split(addr, ":")[1], "--bigkeys").CombinedOutput(); err == nil {
				t.Logf("redis-cli --bigkeys:\n%s", out)
			}
		})
	}
}

// sessionID is the id of the one session in Redis.
func sessionID(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	keys := rdb.Keys(context.Background(), "turnstile:{*}:meta").Val()
	if len(keys) != 1 {
		return ""
	}
	id := strings.TrimPrefix(strings.TrimSuffix(keys[0], "}:meta"), "turnstile:{")
	return id
}
