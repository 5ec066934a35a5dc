package store

import (
	"context"
	"net"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/testwait"
)

func TestStartEmbeddedServesOnLoopback(t *testing.T) {
	mr, err := StartEmbedded(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	host, _, err := net.SplitHostPort(mr.Addr())
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("embedded redis at %q, want 127.0.0.1", mr.Addr())
	}
	c, err := NewRedisClient("redis://"+mr.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := NewRedisStore(c, RedisStoreOptions{}).Ping(context.Background()); err != nil {
		t.Fatalf("ping embedded redis: %v", err)
	}
}

// Nobody fast-forwards the embedded store in a gateway: its keys must
// expire on the gateway's clock as Redis's do on its own, or every
// session's record, lease and window would stay in the gateway's heap for
// good. (On the system clock, the default, a tick is a second of real
// time; the test moves a fake one.)
func TestEmbeddedStoreExpiresKeysOnItsClock(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	mr, err := StartEmbedded(clk)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	c, err := NewRedisClient("redis://"+mr.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Set(ctx, "short", "v", 1500*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "kept", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(ExpiryTick)
	if c.Exists(ctx, "short").Val() != 1 {
		t.Fatal("a key expired a tick before its TTL ran out")
	}
	clk.Advance(ExpiryTick)
	if c.Exists(ctx, "short").Val() != 0 {
		t.Error("a key outlived its TTL by a tick")
	}
	if c.Exists(ctx, "kept").Val() != 1 {
		t.Error("a key without a TTL expired")
	}
}

// A burst of calls (a burst of session starts) leaves no more connections
// to the embedded store open than its client keeps idle: each one left
// would stay, with its buffers and miniredis's two goroutines, for the
// process's life.
func TestEmbeddedClientKeepsFewConnectionsAfterABurst(t *testing.T) {
	mr, err := StartEmbedded(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	c, err := mr.Client(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 100 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			errs <- c.Incr(ctx, "calls").Err()
		}()
		go func() {
			defer wg.Done()
			_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, "k"+strconv.Itoa(i), "v", time.Hour)
				p.Incr(ctx, "calls")
				return nil
			})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Get(ctx, "calls").Val(); n != "200" {
		t.Fatalf("calls = %s, want 200", n)
	}
	testwait.For(t, "the burst's surplus connections to close", func() bool {
		return mr.mr.CurrentConnectionCount() <= EmbeddedIdleConns
	})
}

// A burst of script calls (a burst of session starts) leaves hundreds of
// megabytes of Lua garbage behind it; once the burst is over, the embedded
// store's next tick returns those pages to the OS instead of leaving them
// resident below the collector's target for the process's life. The
// ballast holds the target high, as a node's live sessions do, so that the
// runtime's own scavenger would keep the pages.
func TestEmbeddedStoreReturnsABurstsPagesOnceItIsOver(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	mr, err := StartEmbedded(clk)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	c, err := mr.Client(fixtureTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ballast := make([]byte, 64<<20)
	for i := range ballast {
		ballast[i] = 1
	}
	runtime.GC()
	ctx := context.Background()
	for i := range 300 {
		member := "s:" + strconv.Itoa(i)
		if err := turnsScript.Run(ctx, c, []string{"turnstile:user:{u}:turns"}, int64(i), 60_000, 1000, member).Err(); err != nil {
			t.Fatal(err)
		}
	}
	before := heapReleased()
	clk.Advance(ExpiryTick) // the burst's tick: it allocated
	clk.Advance(ExpiryTick) // the first quiet one
	if got := heapReleased() - before; got < 16<<20 {
		t.Errorf("the ticks after a burst of 300 script calls returned %d KiB to the OS, want at least 16 MiB", got>>10)
	}
	runtime.KeepAlive(ballast)
}

// heapReleased is how much of the heap the runtime has returned to the OS.
func heapReleased() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// miniredis builds a Lua state for every script call, sized by gopher-lua's
// package defaults unless the store sets them (embedded_lua.go): about
// 210 KiB of garbage a call at the defaults, 130 at the store's sizes. A
// voice session runs eight scripts; a burst of session starts is this
// garbage times eight times the sessions, and the heap grows with it.
func TestEmbeddedScriptCallLeavesLittleGarbage(t *testing.T) {
	mr, err := StartEmbedded(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	c, err := mr.Client(fixtureTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	call := func(i int) {
		if err := turnsScript.Run(ctx, c, []string{"turnstile:user:{u}:turns"}, int64(i), 60_000, 1000, "s:"+strconv.Itoa(i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		call(i)
	}
	const calls = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range calls {
		call(20 + i)
	}
	runtime.ReadMemStats(&after)
	if perCall := (after.TotalAlloc - before.TotalAlloc) / calls; perCall > 170<<10 {
		t.Errorf("a script call on the embedded store allocates %d KiB, want at most 170", perCall>>10)
	}
}
