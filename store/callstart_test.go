package store

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// commandCount is a go-redis hook that counts the commands sent alone.
type commandCount struct{ n atomic.Int64 }

func (h *commandCount) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *commandCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h *commandCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

func callStart(sid, sig, holder string) CallStreamStart {
	return CallStreamStart{CallSID: sid, Signature: sig, ReplayTTL: 6 * time.Minute, Holder: holder, LeaseTTL: time.Minute}
}

// A signed start opens one stream: the same start again is a replay,
// refused without a lease; another start of the call (a new webhook
// answer) is not a replay, but the call's one stream lease still refuses
// it while the first stream holds it. Each start is one command.
func TestACallStartIsUsedOnceWithinItsWindow(t *testing.T) {
	for name, start := range map[string]func(*testing.T) *backend{
		"miniredis": startMiniredis, "redis-server": startRedisServer,
	} {
		t.Run(name, func(t *testing.T) {
			b := start(t)
			ctx := context.Background()
			s := b.store(RedisStoreOptions{})
			// Load the script, so that each start below is one command.
			if _, _, err := s.StartCallStream(ctx, callStart("CA0", "sig-0", "")); err != nil {
				t.Fatal(err)
			}
			count := &commandCount{}
			b.client.AddHook(count)
			use := func(st CallStreamStart, wantFirst, wantAdmitted bool) {
				t.Helper()
				before := count.n.Load()
				first, admitted, err := s.StartCallStream(ctx, st)
				if err != nil || first != wantFirst || admitted != wantAdmitted {
					t.Fatalf("StartCallStream(%+v) = %v, %v, %v; want %v, %v", st, first, admitted, err, wantFirst, wantAdmitted)
				}
				if n := count.n.Load() - before; n != 1 {
					t.Fatalf("StartCallStream(%+v) sent %d commands, want one", st, n)
				}
			}
			use(callStart("CA1", "sig-a", "h1"), true, true)
			use(callStart("CA1", "sig-a", "h2"), false, false) // the replay
			use(callStart("CA1", "sig-b", "h3"), true, false)  // another answer, while h1 streams
			use(callStart("CA2", "sig-a", "h4"), true, true)   // another call
			use(callStart("CA3", "sig-a", ""), true, true)     // no lease asked
			use(callStart("CA3", "sig-a", ""), false, false)
			if holders := b.client.ZRange(ctx, CallLeases("CA1"), 0, -1).Val(); len(holders) != 1 || holders[0] != "h1" {
				t.Fatalf("the call's stream leases are %v, want only the first stream's (h1)", holders)
			}
			if n := b.client.Exists(ctx, CallLeases("CA3")).Val(); n != 0 {
				t.Fatalf("a start that asked for no lease left a lease group")
			}
			// Remembered as long as the start is valid, not for ever.
			ttl, err := b.client.PTTL(ctx, callStartKey("CA1", "sig-a")).Result()
			if err != nil || ttl <= 5*time.Minute || ttl > 6*time.Minute {
				t.Fatalf("the record lives %v (%v), want just under 6m", ttl, err)
			}
			// The lease lapses: a new start of the call is admitted.
			if err := s.ReleaseLease(ctx, CallLeases("CA1"), "h1"); err != nil {
				t.Fatal(err)
			}
			use(callStart("CA1", "sig-c", "h5"), true, true)
		})
	}
}

// A call start whose reply is lost has recorded the start: sent again, it
// would find its own record and refuse the stream as a replay. It fails
// instead (and the stream is admitted: the server fails open).
func TestACallStartWhoseReplyIsLostIsNotItsOwnReplay(t *testing.T) {
	s, _, proxy := newLossyStore(t)
	ctx := context.Background()
	// The script loaded (and the connection's hand-shake done) before any
	// reply is lost.
	if _, _, err := s.StartCallStream(ctx, callStart("CA0", "sig-0", "h0")); err != nil {
		t.Fatal(err)
	}
	proxy.armed.Store(true)
	first, _, err := s.StartCallStream(ctx, callStart("CA1", "sig-a", "h1"))
	if err == nil && !first {
		t.Fatal("a call start whose reply was lost was reported as a replay of itself")
	}
}
