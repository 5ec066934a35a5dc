package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/metrics"
)

// leaseClock is wall time plus an offset that tests move forward, so that
// key expiry (which Redis judges by its own clock) stays in the future.
type leaseClock struct{ offset atomic.Int64 }

func (c *leaseClock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *leaseClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

func TestConnectionLeases(t *testing.T) {
	for name, start := range map[string]func(*testing.T) *backend{
		"miniredis": startMiniredis, "redis-server": startRedisServer,
	} {
		t.Run(name, func(t *testing.T) {
			b := start(t)
			ctx := context.Background()
			t.Run("the limit admits that many and a release frees a slot at once", func(t *testing.T) {
				s := b.store(RedisStoreOptions{})
				for i, want := range []bool{true, true, false} {
					ok, err := s.AcquireLease(ctx, UserLeases("alice"), fmt.Sprint("a", i), 2, time.Minute)
					if err != nil || ok != want {
						t.Fatalf("lease %d: (%v, %v), want %v", i, ok, err, want)
					}
				}
				// Another user is not affected.
				if ok, err := s.AcquireLease(ctx, UserLeases("bob"), "b0", 2, time.Minute); !ok || err != nil {
					t.Fatalf("bob: (%v, %v)", ok, err)
				}
				if err := s.ReleaseLease(ctx, UserLeases("alice"), "a0"); err != nil {
					t.Fatal(err)
				}
				if ok, err := s.AcquireLease(ctx, UserLeases("alice"), "a3", 2, time.Minute); !ok || err != nil {
					t.Fatalf("after a release: (%v, %v), want admitted", ok, err)
				}
				if n, err := s.LiveLeases(ctx, UserLeases("alice")); n != 2 || err != nil {
					t.Fatalf("live leases %d, %v; want 2", n, err)
				}
			})
			t.Run("a lease not renewed expires and a renewed one lives", func(t *testing.T) {
				clock := &leaseClock{}
				s := b.store(RedisStoreOptions{Now: clock.now})
				for _, id := range []string{"kept", "dead"} {
					if ok, err := s.AcquireLease(ctx, UserLeases("carol"), id, 2, time.Second); !ok || err != nil {
						t.Fatalf("%s: (%v, %v)", id, ok, err)
					}
				}
				for range 3 {
					clock.advance(800 * time.Millisecond)
					if err := s.RenewLeases(ctx, map[string][]string{UserLeases("carol"): {"kept"}}, time.Second); err != nil {
						t.Fatal(err)
					}
				}
				if n, err := s.LiveLeases(ctx, UserLeases("carol")); n != 1 || err != nil {
					t.Fatalf("live leases %d, %v; want only the renewed one", n, err)
				}
				if ok, err := s.AcquireLease(ctx, UserLeases("carol"), "new", 2, time.Second); !ok || err != nil {
					t.Fatalf("the expired lease still counts: (%v, %v)", ok, err)
				}
			})
			t.Run("renewal adds back a lease Redis lost", func(t *testing.T) {
				s := b.store(RedisStoreOptions{})
				if ok, err := s.AcquireLease(ctx, UserLeases("dave"), "d0", 1, time.Minute); !ok || err != nil {
					t.Fatalf("(%v, %v)", ok, err)
				}
				if err := b.client.Del(ctx, UserLeases("dave")).Err(); err != nil {
					t.Fatal(err)
				}
				if err := s.RenewLeases(ctx, map[string][]string{UserLeases("dave"): {"d0"}, UserLeases("erin"): nil}, time.Minute); err != nil {
					t.Fatal(err)
				}
				if ok, _ := s.AcquireLease(ctx, UserLeases("dave"), "d1", 1, time.Minute); ok {
					t.Fatal("a lease lost and renewed did not count")
				}
				if ttl := b.client.PTTL(ctx, UserLeases("dave")).Val(); ttl <= 0 || ttl > time.Minute {
					t.Fatalf("key TTL %s, want at most the lease TTL", ttl)
				}
			})
			t.Run("concurrent admissions never exceed the limit", func(t *testing.T) {
				s := b.store(RedisStoreOptions{})
				var admitted atomic.Int32
				var wg sync.WaitGroup
				for i := range 20 {
					wg.Go(func() {
						ok, err := s.AcquireLease(ctx, UserLeases("frank"), fmt.Sprint("f", i), 5, time.Minute)
						if err != nil {
							t.Error(err)
						}
						if ok {
							admitted.Add(1)
						}
					})
				}
				wg.Wait()
				if admitted.Load() != 5 {
					t.Fatalf("%d admitted, want 5", admitted.Load())
				}
			})
		})
	}
}

func TestConnectionLeasesFailWhenRedisIsUnreachable(t *testing.T) {
	c, err := NewRedisClient("redis://127.0.0.1:1", 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var ops []string
	s := NewRedisStore(c, RedisStoreOptions{Observe: func(op metrics.RedisOp, _ time.Duration, err error) {
		if err != nil {
			ops = append(ops, string(op))
		}
	}})
	ctx := context.Background()
	if ok, err := s.AcquireLease(ctx, UserLeases("alice"), "a0", 1, time.Minute); ok || err == nil {
		t.Fatalf("AcquireLease = (%v, %v), want an error", ok, err)
	}
	if err := s.RenewLeases(ctx, map[string][]string{UserLeases("alice"): {"a0"}}, time.Minute); err == nil {
		t.Fatal("RenewLeases succeeded without Redis")
	}
	if err := s.ReleaseLease(ctx, UserLeases("alice"), "a0"); err == nil {
		t.Fatal("ReleaseLease succeeded without Redis")
	}
	if fmt.Sprint(ops) != "[lease_acquire lease_renew lease_release]" {
		t.Fatalf("failed ops observed: %v", ops)
	}
}
