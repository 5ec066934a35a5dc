package store

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/internal/redistest"
)

// The Redis cost per-user admission adds to an upgrade (acquire) and to its
// end (release), against a real redis-server on loopback.
func BenchmarkLeaseAcquireRelease(b *testing.B) {
	c, err := NewRedisClient("redis://"+redistest.Start(b), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	s := NewRedisStore(c, RedisStoreOptions{})
	ctx := context.Background()
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		id := strconv.Itoa(i)
		i++
		if ok, err := s.AcquireLease(ctx, UserLeases("alice"), id, 10, time.Minute); !ok || err != nil {
			b.Fatal(ok, err)
		}
		if err := s.ReleaseLease(ctx, UserLeases("alice"), id); err != nil {
			b.Fatal(err)
		}
	}
}

// The renewal a node sends three times per lease TTL: one pipeline for
// 1000 connections of 100 users.
func BenchmarkLeaseRenew1000(b *testing.B) {
	c, err := NewRedisClient("redis://"+redistest.Start(b), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	s := NewRedisStore(c, RedisStoreOptions{})
	leases := map[string][]string{}
	for i := range 1000 {
		u := UserLeases("user" + strconv.Itoa(i%100))
		leases[u] = append(leases[u], strconv.Itoa(i))
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := s.RenewLeases(ctx, leases, time.Minute); err != nil {
			b.Fatal(err)
		}
	}
}
