package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/transport"
)

// TURNSTILE_REDIS_WAIT_REPLICAS on a Redis Cluster: BeginTurn writes the
// user message on a connection of its own to the session's master
// (ClusterClient.MasterForKey) and WAITs there. On the test cluster, which
// has no replicas, the message is not confirmed (ErrNotReplicated) within
// the store timeout instead of hanging, and the same call without the
// requirement is; once the session's master has a replica the wait is
// acknowledged, while a session on another master still is not.
func TestBeginTurnOnAClusterWaitsForTheSessionMastersReplicas(t *testing.T) {
	cl := redistest.StartCluster(t) // three masters, no replicas
	c, err := NewRedisModeClient(RedisCluster, cl.URL(), 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()

	// Two sessions on different masters, and a user on a third master, so
	// that the user's keys are read from another master than the one
	// written and waited on.
	master := func(key string) string { return cl.NodeFor(t, key) }
	var idA, idB, user string
	for i := 0; idA == "" || idB == "" || user == ""; i++ {
		if i > 200 {
			t.Fatalf("no sessions and user on three different masters among 200 names (A %q, B %q, user %q)", idA, idB, user)
		}
		name := fmt.Sprintf("wait-%d", i)
		switch n := master(metaKey(name)); {
		case idA == "":
			idA = name
		case idB == "" && n != master(metaKey(idA)):
			idB = name
		case user == "" && idB != "" && n != master(metaKey(idA)) && n != master(metaKey(idB)):
			user = name // its keys, turnstile:user:{<name>}:…, share the tag's slot
		}
	}
	masterA := master(metaKey(idA))
	lim := TurnLimit{Key: user, Max: 10, Window: time.Minute}

	const timeout = 400 * time.Millisecond
	waiting := NewRedisStore(c, RedisStoreOptions{Redis: Redis{RedisWaitReplicas: 1, RedisTimeout: timeout}})
	plain := NewRedisStore(c, RedisStoreOptions{Redis: Redis{RedisTimeout: timeout}})
	create := func(id string) Record {
		t.Helper()
		rec, _, err := plain.Create(ctx, Record{ID: id, UserID: user, Mode: "text"})
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	// begin starts the record's next turn with text as its user message.
	begin := func(s *RedisStore, rec *Record, text string) (TurnStart, time.Duration, error) {
		rec.Turn++
		start := time.Now()
		ts, err := s.BeginTurn(ctx, *rec, transport.Entry{Role: transport.RoleUser, Text: text, Turn: rec.Turn}, lim)
		return ts, time.Since(start), err
	}
	// notConfirmed expects ErrNotReplicated, in about the store timeout:
	// WAIT gets half the call's deadline, and a slow machine some slack.
	notConfirmed := func(rec *Record, text string) {
		t.Helper()
		_, took, err := begin(waiting, rec, text)
		if !errors.Is(err, ErrNotReplicated) {
			t.Fatalf("BeginTurn of %s with WaitReplicas 1 and no replica: %v, want ErrNotReplicated", rec.ID, err)
		}
		if took > timeout+600*time.Millisecond {
			t.Fatalf("BeginTurn of %s took %v to fail, want about the store timeout %v", rec.ID, took, timeout)
		}
	}
	turnsCounted := func() int64 {
		t.Helper()
		n, err := c.ZCard(ctx, turnsKey(lim)).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	recA := create(idA)
	t.Run("NoReplicaIsNotConfirmed", func(t *testing.T) {
		notConfirmed(&recA, "hello")
		if n := turnsCounted(); n != 0 {
			t.Errorf("%d turns counted for a message that was not confirmed, want 0", n)
		}
	})
	t.Run("WithoutWaitTheSameCallIsConfirmed", func(t *testing.T) {
		ts, _, err := begin(plain, &recA, "hello again")
		if err != nil {
			t.Fatalf("BeginTurn with WaitReplicas 0: %v", err)
		}
		if !ts.Allowed || ts.Block.Until.After(time.Now()) {
			t.Fatalf("BeginTurn with WaitReplicas 0: %+v, want allowed and not blocked", ts)
		}
		if n := turnsCounted(); n != 1 {
			t.Errorf("%d turns counted, want 1", n)
		}
	})
	t.Run("TheSessionMastersReplicaConfirms", func(t *testing.T) {
		replica := cl.AddReplica(t, masterA)
		ts, took, err := begin(waiting, &recA, "replicated")
		if err != nil {
			t.Fatalf("BeginTurn of %s with a replica on its master %s: %v (after %v)", idA, masterA, err, took)
		}
		if !ts.Allowed {
			t.Fatalf("BeginTurn with a replica: %+v, want allowed", ts)
		}
		if n := turnsCounted(); n != 2 {
			t.Errorf("%d turns counted, want 2 (the user's keys are read after the wait)", n)
		}
		// Acknowledged means the replica has it.
		rc := redis.NewClient(&redis.Options{Addr: replica})
		defer rc.Close()
		conn := rc.Conn()
		defer conn.Close()
		if err := conn.ReadOnly(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		hist, err := conn.LRange(ctx, historyKey(idA), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(hist) == 0 || !strings.Contains(hist[len(hist)-1], `"replicated"`) {
			t.Fatalf("the replica's history of %s: %q, want the acknowledged message last", idA, hist)
		}
		// A session whose master has no replica is still not confirmed:
		// the wait is on the session's own master, not on any one.
		recB := create(idB)
		notConfirmed(&recB, "elsewhere")
	})
}
