package store

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

// failFast is the loose bound of these tests: a call to a dead Redis must
// fail, and well before the go-redis defaults (5 s per step) would.
const failFast = 3 * time.Second

// allOpsFail runs every store call and checks each fails promptly.
func allOpsFail(t *testing.T, s *RedisStore) {
	t.Helper()
	ctx := context.Background()
	rec := sampleRecord("s-down")
	ops := []struct {
		op string
		do func() error
	}{
		{"ping", func() error { return s.Ping(ctx) }},
		{"create", func() error { _, _, err := s.Create(ctx, rec); return err }},
		{"resume", func() error { _, _, err := s.Resume(ctx, rec.ID, "tok", rec.UserID); return err }},
		{"append", func() error { return s.Append(ctx, rec, sampleEntries()...) }},
		{"restore", func() error { _, err := s.Restore(ctx, restorable(rec), sampleEntries(), nil); return err }},
		{"begin turn", func() error {
			_, err := s.BeginTurn(ctx, rec, sampleEntries()[0], TurnLimit{Key: "alice", Max: 3})
			return err
		}},
		{"epochs", func() error { _, err := s.Epochs(ctx, []string{rec.ID}); return err }},
	}
	for _, o := range ops {
		start := time.Now()
		err := o.do()
		took := time.Since(start)
		if err == nil {
			t.Errorf("%s succeeded with Redis gone", o.op)
		}
		if errors.Is(err, ErrResumeRefused) {
			t.Errorf("%s: an outage reported as a refusal: %v", o.op, err)
		}
		t.Logf("%s failed after %v: %v", o.op, took, err)
		if took > failFast {
			t.Errorf("%s took %v with Redis gone, want < %v", o.op, took, failFast)
		}
	}
}

func TestRedisStoreFailsFastWhenRedisIsGone(t *testing.T) {
	mr, err := StartEmbedded(nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewRedisClient("redis://"+mr.Addr(), 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := NewRedisStore(c, RedisStoreOptions{Redis: Redis{RedisTimeout: 300 * time.Millisecond}})
	if err := s.Ping(context.Background()); err != nil {
		t.Fatalf("ping while up: %v", err)
	}
	mr.Close()
	allOpsFail(t, s)
}

// A server that accepts connections and never answers is the case that
// hangs a client without deadlines.
func TestRedisStoreFailsFastWhenRedisHangs(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	})
	defer func() {
		l.Close()
		wg.Wait()
		for _, conn := range conns {
			conn.Close()
		}
	}()

	c, err := NewRedisClient("redis://"+l.Addr().String(), 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The store's own timeout is long here, so that only the client's
	// settings can make the calls fail fast.
	allOpsFail(t, NewRedisStore(c, RedisStoreOptions{Redis: Redis{RedisTimeout: time.Minute}}))
}
