package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/store"
)

// TestSessionIsWrittenBackToARedisThatRestartedEmpty: the redis-server of
// a live conversation goes away (killed) and comes back empty on the same
// port, as a Redis without persistence does after a restart. The session
// goes on from memory meanwhile; within seconds of Redis answering again
// the gateway writes it back whole (the turn taken during the outage too),
// so that a new connection, on another gateway, resumes it with its
// history instead of being refused (4004).
func TestSessionIsWrittenBackToARedisThatRestartedEmpty(t *testing.T) {
	srv, cfg, a, b := twoGatewaysOnARestartableRedis(t, []string{"one", "two", "three"}, "four")
	c, ready := twoTurnsOn(a)
	id := ready.str("sessionId")

	srv.Stop()
	// The running session goes on from memory: the turn is answered, and
	// its writes fail (and are counted).
	evs := c.ask("third")
	if errs := ofType(evs, "error"); len(errs) != 0 {
		t.Fatalf("a turn while Redis is down: errors %v, want none (the session goes on from memory)", errs)
	}
	if done := ofType(evs, "text.done"); len(done) != 1 || done[0].str("text") != "three" || last(evs)["turn"] != float64(3) {
		t.Fatalf("a turn while Redis is down: %v, want turn 3 answered %q", evs, "three")
	}
	if n := a.counterSum("turnstile_redis_errors_total"); n == 0 {
		t.Fatal("no store errors while Redis was down: was it?")
	}
	if n := a.counterSum("turnstile_store_restorations_total"); n != 0 {
		t.Fatalf("store_restorations_total = %v before Redis came back", n)
	}

	srv.Restart()
	rdb := redisClientFor(t, cfg)
	ctx := context.Background()
	keys := []string{"turnstile:{" + id + "}:meta", "turnstile:{" + id + "}:history"}
	// No check that the keys are gone here: the node may already have
	// written them back (it notices the loss on its resubscription). That
	// Redis came back empty is what store_restorations_total = 1 says: the
	// node restores only when its marker is gone.
	testwait.ForNil(t, "the session written back after Redis restarted", func() error {
		restored, n := a.counterSum("turnstile_store_restorations_total"), rdb.Exists(ctx, keys...).Val()
		if restored != 1 || n != 2 {
			return fmt.Errorf("store_restorations_total %v, %d of its 2 keys in Redis", restored, n)
		}
		return nil
	})
	// Written back whole, as the gateway knew it: the turn taken while
	// Redis was away too.
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	rec, hist, err := store.NewRedisStore(rdb, store.RedisStoreOptions{}).Load(sctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var stored []string
	for _, e := range hist {
		stored = append(stored, fmt.Sprintf("%d:%s:%s", e.Turn, e.Role, e.Text))
	}
	if got, want := strings.Join(stored, "|"), "1:user:first|1:model:one|2:user:second|2:model:two|3:user:third|3:model:three"; got != want || rec.Turn != 3 {
		t.Fatalf("stored after the restoration (turn %d):\n%s\nwant\n%s", rec.Turn, got, want)
	}

	// A new connection on the other gateway resumes it from Redis; the old
	// connection, still open on A, is taken over.
	r := b.dial("", nil)
	again := r.start(resumeMsg(ready))
	if again["resumed"] != true || again["turn"] != float64(3) {
		t.Fatalf("resume after Redis restarted: %v", again)
	}
	if got, want := historyTexts(again), "user:first|model:one|user:second|model:two|user:third|model:three"; got != want {
		t.Fatalf("resumed history %q, want %q", got, want)
	}
	if code := c.expectClose(); code != protocol.CloseTakenOver {
		t.Fatalf("the old connection on A ended with %d, want %d (taken over)", code, protocol.CloseTakenOver)
	}
	if evs := r.ask("fourth"); last(evs)["turn"] != float64(4) || ofType(evs, "text.done")[0].str("text") != "four" {
		t.Fatalf("the next turn on B: %v", evs)
	}
}

// TestSessionBetweenConnectionsIsWrittenBackToARedisThatRestartedEmpty:
// the browser is between connections (its socket closed, no connection
// anywhere) when Redis restarts empty. The node that served the session
// last keeps a recent copy and writes it back on the same signal as its
// live sessions, so the browser's resume, on another gateway, gets its
// conversation instead of 4004.
func TestSessionBetweenConnectionsIsWrittenBackToARedisThatRestartedEmpty(t *testing.T) {
	srv, cfg, a, b := twoGatewaysOnARestartableRedis(t, []string{"one", "two"}, "three")
	c, ready := twoTurnsOn(a)
	id := ready.str("sessionId")
	c.c.CloseNow()
	testwait.For(t, "the connection to end on A", func() bool { return a.gw.sessions.Active() == 0 })

	srv.Stop()
	srv.Restart()
	rdb := redisClientFor(t, cfg)
	ctx := context.Background()
	keys := []string{"turnstile:{" + id + "}:meta", "turnstile:{" + id + "}:history"}
	testwait.For(t, "the session written back by A", func() bool {
		return a.counterSum("turnstile_store_restorations_total") == 1 && rdb.Exists(ctx, keys...).Val() == 2
	})

	r := b.dial("", nil)
	again := r.start(resumeMsg(ready))
	if again["resumed"] != true || again["turn"] != float64(2) {
		t.Fatalf("resume after Redis restarted empty while the browser was away: %v", again)
	}
	if got, want := historyTexts(again), "user:first|model:one|user:second|model:two"; got != want {
		t.Fatalf("resumed history %q, want %q", got, want)
	}
	if evs := r.ask("third"); last(evs)["turn"] != float64(3) || ofType(evs, "text.done")[0].str("text") != "three" {
		t.Fatalf("the next turn on B: %v", evs)
	}
}

// twoGatewaysOnARestartableRedis starts a redis-server the test can restart
// empty and two gateways on it: A answers with aSays in turn, B with bSays.
func twoGatewaysOnARestartableRedis(t *testing.T, aSays []string, bSays string) (*redistest.Server, gateway.Config, *testGateway, *testGateway) {
	t.Helper()
	srv := redistest.StartServer(t)
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + srv.Addr)
	var steps []func(*fakegemini.Request) fakegemini.Reply
	for _, say := range aSays {
		steps = append(steps, textStep(say))
	}
	return srv, cfg, startGateway(t, cfg, fakegemini.NewScript(steps...)), startGateway(t, cfg, fakegemini.NewScript(textStep(bSays)))
}

// twoTurnsOn starts a session on g and asks "first" and "second".
func twoTurnsOn(g *testGateway) (*wsClient, event) {
	c := g.dial("", nil)
	ready := c.start(nil)
	c.ask("first")
	c.ask("second")
	return c, ready
}
