package server

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/internal/throttle"
	"github.com/turnstile-gw/turnstile/store"
)

// pausedRenewal is the Redis store whose lease renewals wait, once they
// have their snapshot, until the test lets them write it.
type pausedRenewal struct {
	*store.RedisStore
	renewing, proceed chan struct{}
}

func (p pausedRenewal) RenewLeases(ctx context.Context, leases map[string][]string, ttl time.Duration) error {
	p.renewing <- struct{}{}
	<-p.proceed
	return p.RedisStore.RenewLeases(ctx, leases, ttl)
}

// embeddedStore is a store on the gateway's embedded Redis, closed with
// the test.
func embeddedStore(t *testing.T) *store.RedisStore {
	t.Helper()
	mr, err := store.StartEmbedded(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mr.Close)
	rdb, err := store.NewRedisClient("redis://"+mr.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return store.NewRedisStore(rdb, store.RedisStoreOptions{})
}

// A connection that ends while a renewal that saw its lease is writing
// must not have its lease brought back by that renewal: it would hold the
// user's place for a whole TTL after the connection is gone (seen as
// 429s for a user with no connection left, after Redis restarted empty
// and every store check renewed the leases).
func TestLeaseReleasedDuringARenewalStaysReleased(t *testing.T) {
	st := pausedRenewal{embeddedStore(t), make(chan struct{}), make(chan struct{})}
	a := &admission{perUser: 1, store: st, ttl: time.Hour, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		throttle: &throttle.Keyed{Every: time.Minute}, held: map[string]map[string]struct{}{}}
	ctx := context.Background()
	group := store.UserLeases("alice")

	release, ok := a.lease(ctx, group, 1, "lease not taken")
	if !ok {
		t.Fatal("alice's first connection was refused")
	}
	renewed := make(chan struct{})
	go func() { defer close(renewed); a.renewOnce(ctx) }()
	<-st.renewing // the renewal has alice's lease in its snapshot
	released := make(chan struct{})
	go func() { defer close(released); release() }()
	select {
	case <-released:
		// Released before the renewal wrote: the renewal must not bring it back.
	case <-time.After(100 * time.Millisecond):
		// The release waits for the renewal (the fix); let it write.
	}
	close(st.proceed)
	<-renewed
	<-released

	if _, ok := a.lease(ctx, group, 1, "lease not taken"); !ok {
		t.Fatal("alice's connection ended, yet a new one is refused: the renewal brought her released lease back")
	}
}
