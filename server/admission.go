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

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/throttle"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/telephony"
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

// Leases count holders in a group across all nodes: one user's open
// connections, one call's streams (the store's RedisStore implements it;
// store.UserLeases and store.CallLeases name the groups). Errors mean Redis
// did not answer.
type Leases interface {
	AcquireLease(ctx context.Context, group, id string, limit int, ttl time.Duration) (admitted bool, err error)
	RenewLeases(ctx context.Context, leases map[string][]string, ttl time.Duration) error
	ReleaseLease(ctx context.Context, group, id string) error
}

// admission holds the per-node session count, and the leases of this
// node's connections (per user) and of its calls' streams (per call).
type admission struct {
	maxSessions int // 0: no limit
	sessions    atomic.Int64

	perUser  int // 0 (or no Leases): no limit
	store    Leases
	ttl      time.Duration
	log      *slog.Logger
	throttle *throttle.Keyed

	mu   sync.Mutex
	held map[string]map[string]struct{} // lease group → this node's holder ids
	// renewing is held while a renewal writes its snapshot of held, and
	// by a release around its removal: a lease released while a renewal
	// that saw it is in flight is removed after the renewal wrote it, not
	// before (which would bring it back for a whole TTL).
	renewing sync.Mutex

	stop context.CancelFunc
	done chan struct{}
	kick chan struct{} // renew now (Redis lost its data or answers again)
}

func newAdmission(cfg Config, d Deps, throttle *throttle.Keyed) *admission {
	a := &admission{
		maxSessions: cfg.MaxSessions, perUser: cfg.MaxSessionsPerUser, store: d.Leases, ttl: cfg.UserLeaseTTL,
		log: d.Log, throttle: throttle, held: map[string]map[string]struct{}{}, kick: make(chan struct{}, 1),
	}
	if a.ttl <= 0 {
		a.ttl = DefaultLeaseTTL
	}
	// In dev mode every anonymous connection is a user of its own: it
	// holds one connection, within any limit, and needs no lease.
	if a.store == nil || d.Auth.DevMode() {
		a.perUser = 0
	}
	// Calls hold a lease each (one stream per call across the fleet)
	// whenever there is a store.
	if a.store != nil && (a.perUser > 0 || d.Telephony != nil) {
		ctx, cancel := context.WithCancel(context.Background())
		a.stop, a.done = cancel, make(chan struct{})
		go a.renew(ctx)
		// A Redis that restarted empty lost every lease: they are written
		// back as soon as the node notices, not at the next renewal.
		if d.Sessions != nil {
			d.Sessions.OnStoreCheck(a.renewNow)
		}
	}
	return a
}

// renewNow asks the renewal loop to renew every lease at once.
func (a *admission) renewNow() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
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

// full reports whether the node holds as many sessions as it may.
func (a *admission) full() bool {
	return a.maxSessions > 0 && a.sessions.Load() >= int64(a.maxSessions)
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
	return a.lease(ctx, store.UserLeases(user), a.perUser,
		"per-user connection limit not enforced: Redis did not answer; connection admitted")
}

// callVerdict is admitCall's answer to a call's stream.
type callVerdict int

const (
	callAdmitted  callVerdict = iota
	callReplayed              // its signed start was used by a stream before
	callElsewhere             // another stream of the call holds its lease
)

// admitCall opens a call's stream across the fleet: the first use of its
// signed start (signature) is recorded and the one lease a call's stream
// may hold is taken, in one round trip (starts.StartCallStream); release
// ends the lease at once. Without a store to renew leases in, only the
// start is recorded. When Redis does not answer the stream is admitted
// (only the start's age bounds a replay then, and the node's own check,
// streamingCalls, the call's streams), the failure counted and logged, and
// the lease kept locally as admitUser's.
func (a *admission) admitCall(ctx context.Context, starts CallStarts, callSID, signature string) (release func(), v callVerdict) {
	group := store.CallLeases(callSID)
	leased := a.stop != nil
	st := store.CallStreamStart{CallSID: callSID, Signature: signature, ReplayTTL: telephony.ReplayWindow}
	if leased {
		st.Holder, st.LeaseTTL = newLeaseID(), a.ttl
	}
	first, admitted, err := starts.StartCallStream(ctx, st)
	switch {
	case err != nil:
		// redis_errors_total{op="call_start"} counts it (the store's hook).
		if count, ok := a.throttle.Note("call_start_failed", clock.Wall.Now(), 1); ok {
			a.log.Warn("replayed call starts not refused: Redis did not answer; stream admitted", "err", err,
				"count", count)
		}
	case !first:
		return nil, callReplayed
	case !admitted:
		return nil, callElsewhere
	}
	if !leased {
		return func() {}, callAdmitted
	}
	return a.hold(group, st.Holder), callAdmitted
}

// lease takes a lease in group under limit, and keeps it renewed until
// release. failOpen is logged when Redis does not answer (then the holder
// is admitted and the lease kept locally, so that the next renewal writes
// it once Redis is back).
func (a *admission) lease(ctx context.Context, group string, limit int, failOpen string) (release func(), ok bool) {
	id := newLeaseID()
	admitted, err := a.store.AcquireLease(ctx, group, id, limit, a.ttl)
	if err != nil {
		// redis_errors_total{op="lease_acquire"} counts it (the store's hook).
		if count, ok := a.throttle.Note("lease_acquire_failed", clock.Wall.Now(), 1); ok {
			a.log.Warn(failOpen, "err", err, "count", count)
		}
	} else if !admitted {
		return nil, false
	}
	return a.hold(group, id), true
}

// hold keeps holder id's lease in group renewed until release, which ends
// it at once.
func (a *admission) hold(group, id string) (release func()) {
	a.mu.Lock()
	if a.held[group] == nil {
		a.held[group] = map[string]struct{}{}
	}
	a.held[group][id] = struct{}{}
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		delete(a.held[group], id)
		if len(a.held[group]) == 0 {
			delete(a.held, group)
		}
		a.mu.Unlock()
		a.renewing.Lock()
		defer a.renewing.Unlock()
		// The session has ended; its context is gone.
		if err := a.store.ReleaseLease(context.Background(), group, id); err != nil {
			if count, ok := a.throttle.Note("lease_release_failed", clock.Wall.Now(), 1); ok {
				a.log.Warn("connection lease not released: Redis did not answer; it expires by itself",
					"err", err, "expires_in", a.ttl, "count", count)
			}
		}
	}
}

// renew extends every lease this node holds, three times per TTL and when
// kicked (renewNow), in one pipeline, until ctx ends.
func (a *admission) renew(ctx context.Context) {
	defer close(a.done)
	t := clock.Wall.NewTicker(a.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.kick:
		}
		a.renewOnce(ctx)
	}
}

// renewOnce writes every lease held now, under renewing (see there).
func (a *admission) renewOnce(ctx context.Context) {
	a.renewing.Lock()
	defer a.renewing.Unlock()
	a.mu.Lock()
	leases := make(map[string][]string, len(a.held))
	for group, ids := range a.held {
		for id := range ids {
			leases[group] = append(leases[group], id)
		}
	}
	a.mu.Unlock()
	if err := a.store.RenewLeases(ctx, leases, a.ttl); err != nil && ctx.Err() == nil {
		if count, ok := a.throttle.Note("lease_renew_failed", clock.Wall.Now(), 1); ok {
			a.log.Warn("connection leases not renewed: Redis did not answer", "err", err, "groups", len(leases),
				"count", count)
		}
	}
}

func newLeaseID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func retryAfter(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }
