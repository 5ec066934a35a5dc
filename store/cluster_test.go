package store

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/internal/redistest"
)

// startRedisCluster is a backend on a real three-master Redis Cluster, in
// TURNSTILE_REDIS_MODE=cluster as the gateway builds it.
func startRedisCluster(t *testing.T) *backend {
	cl := redistest.StartCluster(t)
	c, err := NewRedisModeClient(RedisCluster, cl.URL(), 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &backend{client: c}
}

// eachServer runs fn on every server of the backend: the masters of a
// cluster, else the one server.
func (b *backend) eachServer(t *testing.T, fn func(ctx context.Context, c redis.UniversalClient) error) {
	t.Helper()
	ctx := context.Background()
	var err error
	if cc, ok := b.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return fn(ctx, c) })
	} else {
		err = fn(ctx, b.client)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// flush empties every server.
func (b *backend) flush(t *testing.T) {
	t.Helper()
	b.eachServer(t, func(ctx context.Context, c redis.UniversalClient) error { return c.FlushAll(ctx).Err() })
}

// keys lists every key of every server (SCAN reaches one server only).
func (b *backend) keys(t *testing.T) []string {
	t.Helper()
	var (
		mu   sync.Mutex // ForEachMaster runs on the masters concurrently
		keys []string
	)
	b.eachServer(t, func(ctx context.Context, c redis.UniversalClient) error {
		iter := c.Scan(ctx, 0, "*", 100).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			keys = append(keys, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	})
	return keys
}
