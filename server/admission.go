package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnstile-gw/turnstile/internal/throttle"
)

// Retry-After of the admission refusals.
const (
	// retryAfterNodeFull: another node may have room at once; a client
	// that retries through the load balancer soon may land there.
	retryAfterNodeFull = 5 * time.Second
	// retryAfterUserFull: a slot frees when one of the user's connections
	// ends (at once) or when a dead node's lease expires.
	retryAfterUserFull = 10 * time.Second
	// DefaultLeaseTTL is how long a per-user connection lease lives
	// without renewal: how long a dead node's connections keep counting.
	// Leases are renewed three times per TTL.
	DefaultLeaseTTL = 30 * time.Second
)

// Leases count one user's open connections across all nodes (the store's
// RedisStore implements it). Errors mean Redis did not answer.
type Leases interface {
	AcquireLease(ctx context.Context, user, id string, limit int, ttl time.Duration) (admitted bool, err error)
	RenewLeases(ctx context.Context, leases map[string][]string, ttl time.Duration) error
	ReleaseLease(ctx context.Context, user, id string) error
}

// admission holds the per-node session count and the per-user leases of
// this node's connections.
type admission struct {
	maxSessions int // 0: no limit
	sessions    atomic.Int64

	perUser  int // 0 (or no Leases): no limit
	store    Leases
	ttl      time.Duration
	log      *slog.Logger
	throttle *throttle.Keyed

	mu   sync.Mutex
	held map[string]map[string]struct{} // user → this node's connection ids

	stop context.CancelFunc
	done chan struct{}
}

func newAdmission(cfg Config, d Deps, throttle *throttle.Keyed) *admission {
	a := &admission{
		maxSessions: cfg.MaxSessions, perUser: cfg.MaxSessionsPerUser, store: d.Leases, ttl: cfg.LeaseTTL,
		log: d.Log, throttle: throttle, held: map[string]map[string]struct{}{},
	}
	if a.ttl <= 0 {
		a.ttl = DefaultLeaseTTL
	}
	// In dev mode every anonymous connection is a user of its own: it
	// holds one connection, within any limit, and needs no lease.
	if a.store == nil || d.Auth.DevMode() {
		a.perUser = 0
	}
	if a.perUser > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		a.stop, a.done = cancel, make(chan struct{})
		go a.renew(ctx)
	}
	return a
}

// close stops renewing leases.
func (a *admission) close() {
	if a.stop != nil {
		a.stop()
		<-a.done
		a.stop = nil
	}
}

// admitSession takes a place among the node's sessions; release gives it
// back. ok is false when the node is full.
func (a *admission) admitSession() (release func(), ok bool) {
	n := a.sessions.Add(1)
	if a.maxSessions > 0 && n > int64(a.maxSessions) {
		a.sessions.Add(-1)
		return nil, false
	}
	return func() { a.sessions.Add(-1) }, true
}

// admitUser takes a lease for one more connection of user; release ends
// it at once. ok is false when the user is at the limit. When Redis does
// not answer the connection is admitted (the limit is not worth refusing
// everyone for), the failure counted and logged, and the lease kept
// locally so that the next renewal writes it once Redis is back.
func (a *admission) admitUser(ctx context.Context, user string) (release func(), ok bool) {
	if a.perUser <= 0 {
		return func() {}, true
	}
	id := newLeaseID()
	admitted, err := a.store.AcquireLease(ctx, user, id, a.perUser, a.ttl)
	if err != nil {
		// redis_errors_total{op="lease_acquire"} counts it (the store's hook).
		if count, ok := a.throttle.Note("lease_acquire_failed", time.Now(), 1); ok {
			a.log.Warn("per-user connection limit not enforced: Redis did not answer; connection admitted",
				"err", err, "count", count)
		}
	} else if !admitted {
		return nil, false
	}
	a.mu.Lock()
	if a.held[user] == nil {
		a.held[user] = map[string]struct{}{}
	}
	a.held[user][id] = struct{}{}
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		delete(a.held[user], id)
		if len(a.held[user]) == 0 {
			delete(a.held, user)
		}
		a.mu.Unlock()
		// The session has ended; its context is gone.
		if err := a.store.ReleaseLease(context.Background(), user, id); err != nil {
			if count, ok := a.throttle.Note("lease_release_failed", time.Now(), 1); ok {
				a.log.Warn("connection lease not released: Redis did not answer; it expires by itself",
					"err", err, "expires_in", a.ttl, "count", count)
			}
		}
	}, true
}

// renew extends every lease this node holds, three times per TTL, in one
// pipeline, until ctx ends.
func (a *admission) renew(ctx context.Context) {
	defer close(a.done)
	t := time.NewTicker(a.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a.mu.Lock()
		leases := make(map[string][]string, len(a.held))
		for user, ids := range a.held {
			for id := range ids {
				leases[user] = append(leases[user], id)
			}
		}
		a.mu.Unlock()
		if err := a.store.RenewLeases(ctx, leases, a.ttl); err != nil && ctx.Err() == nil {
			if count, ok := a.throttle.Note("lease_renew_failed", time.Now(), 1); ok {
				a.log.Warn("connection leases not renewed: Redis did not answer", "err", err, "users", len(leases),
					"count", count)
			}
		}
	}
}

func newLeaseID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func retryAfter(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }
