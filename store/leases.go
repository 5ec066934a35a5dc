package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Connection leases count one user's open connections across all nodes,
// for the per-user connection limit. Each connection holds a lease: a
// member of the user's sorted set turnstile:user:{<user>}:conns whose score
// is when the lease expires. The node serving the connection renews its
// leases while the connection lives and releases the lease when it ends; a
// node that dies stops renewing, and its leases stop counting when they
// expire. Only live leases count: admission drops expired ones first.

//go:embed lease_acquire.lua
var leaseAcquireLua string

var leaseAcquireScript = redis.NewScript(leaseAcquireLua)

func leasesKey(user string) string { return "turnstile:user:{" + user + "}:conns" }

// AcquireLease admits connection id of user when the user holds fewer than
// limit live leases, and then holds a lease for it that expires after ttl.
// One round trip (a Lua script; the first call on a server that has not
// cached it costs two). The error is non-nil only when Redis did not answer;
// admitted is then false.
func (s *RedisStore) AcquireLease(ctx context.Context, user, id string, limit int, ttl time.Duration) (admitted bool, err error) {
	if limit < 1 || ttl <= 0 || id == "" {
		return false, fmt.Errorf("acquire lease: limit %d, ttl %s, id %q: need a positive limit and ttl and an id", limit, ttl, id)
	}
	err = s.call(ctx, "lease_acquire", func(ctx context.Context) error {
		now := s.now()
		res, err := leaseAcquireScript.Run(ctx, s.c, []string{leasesKey(user)},
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

// RenewLeases extends the leases of leases (user → connection ids) to
// expire after ttl, adding back any that Redis lost (a restart, an expiry
// while this node could not reach it): one pipeline for all users, one
// ZADD per user.
func (s *RedisStore) RenewLeases(ctx context.Context, leases map[string][]string, ttl time.Duration) error {
	if len(leases) == 0 {
		return nil
	}
	return s.call(ctx, "lease_renew", func(ctx context.Context) error {
		expiry := s.now().Add(ttl)
		score := float64(expiry.UnixMilli())
		_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for user, ids := range leases {
				if len(ids) == 0 {
					continue
				}
				members := make([]redis.Z, len(ids))
				for i, id := range ids {
					members[i] = redis.Z{Score: score, Member: id}
				}
				p.ZAdd(ctx, leasesKey(user), members...)
				p.PExpireAt(ctx, leasesKey(user), expiry)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("renew leases of %d users: %w", len(leases), err)
		}
		return nil
	})
}

// ReleaseLease ends connection id's lease at once, freeing its slot.
func (s *RedisStore) ReleaseLease(ctx context.Context, user, id string) error {
	return s.call(ctx, "lease_release", func(ctx context.Context) error {
		if err := s.c.ZRem(ctx, leasesKey(user), id).Err(); err != nil {
			return fmt.Errorf("release lease: %w", err)
		}
		return nil
	})
}

// LiveLeases counts user's leases that have not expired.
func (s *RedisStore) LiveLeases(ctx context.Context, user string) (int, error) {
	var n int64
	err := s.call(ctx, "lease_count", func(ctx context.Context) error {
		var err error
		n, err = s.c.ZCount(ctx, leasesKey(user), "("+strconv.FormatInt(s.now().UnixMilli(), 10), "+inf").Result()
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
