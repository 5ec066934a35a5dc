package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// pipelineSizes is a go-redis hook that notes how many commands each
// pipeline that adds to a sorted set carried (not the connection's
// handshake).
type pipelineSizes struct {
	mu    sync.Mutex
	sizes []int
}

func (h *pipelineSizes) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *pipelineSizes) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *pipelineSizes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if c.Name() == "zadd" {
				h.mu.Lock()
				h.sizes = append(h.sizes, len(cmds))
				h.mu.Unlock()
				break
			}
		}
		return next(ctx, cmds)
	}
}

// A node renewing many sessions in the live index renews every one of them,
// in pipelines of at most markLiveBatch sessions: the commands of one are
// all held at once before it is sent.
func TestMarkLiveRenewsEverySessionInBoundedPipelines(t *testing.T) {
	b := startMiniredis(t)
	hook := &pipelineSizes{}
	b.client.AddHook(hook)
	s := b.store(RedisStoreOptions{})
	ctx := context.Background()
	ids := make([]string, 2*markLiveBatch+7)
	for i := range ids {
		ids[i] = fmt.Sprintf("s_live_%d", i)
	}
	if err := s.MarkLive(ctx, "node-a", ids, time.Minute); err != nil {
		t.Fatal(err)
	}
	if n := b.client.ZCard(ctx, liveKey).Val(); n != int64(len(ids)) {
		t.Fatalf("%d sessions in the live index, want %d", n, len(ids))
	}
	for _, id := range ids {
		if node := b.client.Get(ctx, holderKey(id)).Val(); node != "node-a" {
			t.Fatalf("session %s held by %q, want node-a", id, node)
		}
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	if len(hook.sizes) != 3 {
		t.Fatalf("pipelines of %v commands, want three", hook.sizes)
	}
	for _, n := range hook.sizes {
		// ZREMRANGEBYSCORE (the first), ZADD, PEXPIRE and a SET a session.
		if n > markLiveBatch+3 {
			t.Fatalf("a pipeline of %d commands (%v): more than %d sessions at once", n, hook.sizes, markLiveBatch)
		}
	}
}
