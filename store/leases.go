package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/turnstile-gw/turnstile/metrics"
)

// Leases count holders of something across all nodes, under a limit: one
// user's open connections, for the per-user connection limit
// (UserLeases), and the one stream a phone call may have (CallLeases).
// Each holder holds a lease: a member of the group's sorted set whose score
// is when the lease expires. The node serving the holder renews its leases
// while the holder lives and releases the lease when it ends; a node that
// dies stops renewing, and its leases stop counting when they expire. Only
// live leases count: admission drops expired ones first.

var (
	//go:embed lease.lua
	leaseLua string
	//go:embed lease_acquire.lua
	leaseAcquireLua string

	leaseAcquireScript = leaseScript(leaseAcquireLua)
)

// leaseScript is a script that takes a lease: acquire (lease.lua), the
// one admission under a limit that AcquireLease and StartCallStream share,
// is prepended to it as a function.
func leaseScript(body string) *luaScript { return newScript(leaseLua + body) }

// UserLeases is the lease group of user's connections.
func UserLeases(user string) string { return "turnstile:user:{" + user + "}:conns" }

// CallLeases is the lease group of a phone call's media streams (callSID is
// the carrier's call id): with a limit of 1, one stream per call across
// the fleet.
func CallLeases(callSID string) string { return "turnstile:call:{" + callSID + "}:streams" }

// AcquireLease admits holder id into group (UserLeases, CallLeases) when
// the group holds fewer than limit live leases, and then holds a lease for it that expires after ttl.
// One round trip (a Lua script; the first call on a server that has not
// cached it costs two). The error is non-nil only when Redis did not answer;
// admitted is then false.
func (s *RedisStore) AcquireLease(ctx context.Context, group, id string, limit int, ttl time.Duration) (admitted bool, err error) {
	if limit < 1 || ttl <= 0 || id == "" {
		return false, fmt.Errorf("acquire lease: limit %d, ttl %s, id %q: need a positive limit and ttl and an id", limit, ttl, id)
	}
	err = s.call(ctx, metrics.RedisLeaseAcquire, func(ctx context.Context) error {
		now := s.now()
		res, err := leaseAcquireScript.Run(ctx, s.c, []string{group},
			now.UnixMilli(), now.Add(ttl).UnixMilli(), limit, id).Int64Slice()
		if err != nil {
			return fmt.Errorf("acquire lease: %w", err)
		}
		if len(res) != 2 {
			return fmt.Errorf("acquire lease: script answered %v", res)
		}
		admitted = res[0] == 1
		return nil
	})
	return admitted && err == nil, err
}

// RenewLeases extends the leases of leases (group → holder ids) to expire
// after ttl, adding back any that Redis lost (a restart, an expiry while
// this node could not reach it): one pipeline for all groups, one ZADD per
// group.
func (s *RedisStore) RenewLeases(ctx context.Context, leases map[string][]string, ttl time.Duration) error {
	if len(leases) == 0 {
		return nil
	}
	return s.call(ctx, metrics.RedisLeaseRenew, func(ctx context.Context) error {
		expiry := s.now().Add(ttl)
		score := float64(expiry.UnixMilli())
		_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for group, ids := range leases {
				if len(ids) == 0 {
					continue
				}
				members := make([]redis.Z, len(ids))
				for i, id := range ids {
					members[i] = redis.Z{Score: score, Member: id}
				}
				p.ZAdd(ctx, group, members...)
				p.PExpireAt(ctx, group, expiry)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("renew leases of %d groups: %w", len(leases), err)
		}
		return nil
	})
}

// ReleaseLease ends holder id's lease in group at once, freeing its slot.
func (s *RedisStore) ReleaseLease(ctx context.Context, group, id string) error {
	return s.call(ctx, metrics.RedisLeaseRelease, func(ctx context.Context) error {
		if err := s.c.ZRem(ctx, group, id).Err(); err != nil {
			return fmt.Errorf("release lease: %w", err)
		}
		return nil
	})
}

// LiveLeases counts group's leases that have not expired.
func (s *RedisStore) LiveLeases(ctx context.Context, group string) (int, error) {
	var n int64
	err := s.call(ctx, metrics.RedisLeaseCount, func(ctx context.Context) error {
		var err error
		n, err = s.c.ZCount(ctx, group, "("+strconv.FormatInt(s.now().UnixMilli(), 10), "+inf").Result()
		if errors.Is(err, redis.Nil) {
			n, err = 0, nil
		}
		if err != nil {
			return fmt.Errorf("count leases: %w", err)
		}
		return nil
	})
	return int(n), err
}
