package store

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/internal/testwait"
)

func TestStartEmbeddedServesOnLoopback(t *testing.T) {
	mr, err := StartEmbedded()
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
// expire on the wall clock as Redis's do, or every session's record, lease
// and window would stay in the gateway's heap for good.
func TestEmbeddedStoreExpiresKeysOnTheWallClock(t *testing.T) {
	mr, err := StartEmbedded()
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
	if err := c.Set(ctx, "short", "v", 50*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "kept", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the key with a 50 ms TTL to expire", func() bool {
		return c.Exists(ctx, "short").Val() == 0
	})
	if c.Exists(ctx, "kept").Val() != 1 {
		t.Error("a key without a TTL expired")
	}
}
