package store

import (
	"context"
	"net"
	"testing"
	"time"
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
