package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/orchestrator"
)

// slotWatch is a go-redis hook that sees every command the store sends,
// alone or in a pipeline, and keeps the errors that a Redis Cluster raises
// for a command, transaction or script whose keys are not on one slot
// (CROSSSLOT, and Lua's "keys that do not hash to the same slot" / "non
// local key"), even where the store would swallow them.
type slotWatch struct {
	mu      sync.Mutex
	slotErr []string
	names   map[string]int // commands seen, by name
}

func (w *slotWatch) DialHook(next redis.DialHook) redis.DialHook { return next }

func (w *slotWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		w.see(cmd)
		return err
	}
}

func (w *slotWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			w.see(c)
		}
		return err
	}
}

func (w *slotWatch) see(cmd redis.Cmder) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.names[cmd.Name()]++
	err := cmd.Err()
	if err == nil || errors.Is(err, redis.Nil) {
		return
	}
	msg := err.Error()
	for _, s := range []string{"CROSSSLOT", "same slot", "non local key", "MOVED", "ASK "} {
		if strings.Contains(msg, s) {
			w.slotErr = append(w.slotErr, fmt.Sprintf("%v: %s", cmd.Args(), msg))
		}
	}
}

// TestNoStoreOperationRaisesCrossSlotOnACluster runs every store operation
// against a real three-master Redis Cluster, for a session and a user whose
// hash tags live on different masters, and fails on any slot error. It
// guards the design rule: the keys of a session share one hash tag, the keys
// of a user another, and no script or transaction spans two tags (a plain
// pipeline may: go-redis splits it by slot).
func TestNoStoreOperationRaisesCrossSlotOnACluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	c, err := NewRedisModeClient(RedisCluster, cl.URL(), 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	watch := &slotWatch{names: map[string]int{}}
	c.AddHook(watch)
	s := NewRedisStore(c, RedisStoreOptions{Redis: Redis{RedisTimeout: 2 * time.Second, UserStorageBytes: 1 << 20}})
	ctx := context.Background()

	// A session and a user on different masters: a script or MULTI that
	// touched both could not run on either.
	rec := sampleRecord("")
	for i := 0; ; i++ {
		rec.ID, rec.UserID = fmt.Sprintf("s-slots-%d", i), fmt.Sprintf("u-slots-%d", i)
		if cl.NodeFor(t, metaKey(rec.ID)) != cl.NodeFor(t, blockKey(rec.UserID)) {
			break
		}
	}
	conf := orchestrator.Confirmation{Token: "c_tok1", SessionID: rec.ID, UserID: rec.UserID, Tool: "refund",
		ArgsDigest: "d1", Args: map[string]any{"amount": 3.0}, Turn: 1, ExpiresAt: time.Now().Add(time.Minute)}
	block := Block{Until: time.Now().Add(time.Hour).Truncate(time.Millisecond), Reason: "abuse"}
	var tok string
	// approve asks for conf's confirmation again and approves it.
	approve := func() error {
		if _, _, err := s.ConsumeOrRequest(ctx, conf); err != nil {
			return err
		}
		_, err := s.Resolve(ctx, rec.ID, rec.Epoch, rec.UserID, conf.Token, true, time.Minute)
		return err
	}

	ops := []struct {
		name string
		do   func() error
	}{
		{"Ping", func() error { return s.Ping(ctx) }},
		{"Create", func() error { rec, tok, err = s.Create(ctx, rec); return err }},
		{"Resume", func() error {
			got, _, err := s.Resume(ctx, rec.ID, tok, rec.UserID)
			rec.Epoch = got.Epoch // the resume took ownership
			return err
		}},
		{"Append", func() error { rec.Turn = 1; return s.Append(ctx, rec, sampleEntries()...) }},
		{"AppendWithBlock (no block)", func() error {
			b, err := s.AppendWithBlock(ctx, rec, textEntries("hello")...)
			if err == nil && !b.Until.IsZero() {
				err = fmt.Errorf("block %+v before any was set", b)
			}
			return err
		}},
		{"BlockUser", func() error { return s.BlockUser(ctx, rec.UserID, block) }},
		{"Strike", func() error { _, err := s.Strike(ctx, rec.UserID, time.Hour); return err }},
		{"BlockOf", func() error {
			b, err := s.BlockOf(ctx, rec.UserID)
			if err == nil && !b.Until.Equal(block.Until) {
				err = fmt.Errorf("block %+v, want %+v", b, block)
			}
			return err
		}},
		{"AppendWithBlock (blocked)", func() error {
			rec.Turn = 2
			b, err := s.AppendWithBlock(ctx, rec, textEntries("are you there?")...)
			if err == nil && !b.Until.Equal(block.Until) {
				err = fmt.Errorf("the block on another master was not read: %+v", b)
			}
			return err
		}},
		{"BeginTurn", func() error {
			rec.Turn = 3
			st, err := s.BeginTurn(ctx, rec, textEntries("one more")[0], TurnLimit{Key: rec.UserID, Max: 10, Window: time.Minute})
			if err == nil && (!st.Allowed || !st.Block.Until.Equal(block.Until)) {
				err = fmt.Errorf("turn start %+v", st)
			}
			return err
		}},
		{"Undo", func() error { rec.Turn = 2; return s.Undo(ctx, rec, 3) }},
		{"CountTurn", func() error {
			_, _, err := s.CountTurn(ctx, TurnLimit{Key: rec.UserID, Max: 10, Window: time.Minute}, "typed-in-voice")
			return err
		}},
		{"CountTurn voice starts", func() error {
			_, _, err := s.CountTurn(ctx, TurnLimit{Key: rec.ID, Kind: KindVoiceStarts, Max: 10, Window: time.Minute}, "v1")
			return err
		}},
		{"CountTurn sessions", func() error {
			_, _, err := s.CountTurn(ctx, TurnLimit{Key: rec.UserID, Kind: KindSessions, Max: 10, Window: time.Minute}, "s_new")
			return err
		}},
		{"Epochs", func() error {
			e, err := s.Epochs(ctx, []string{rec.ID, "s_missing"})
			if err == nil && (len(e) != 2 || e[0] != rec.Epoch || e[1] != 0) {
				err = fmt.Errorf("epochs %v, want [%d 0]", e, rec.Epoch)
			}
			return err
		}},
		{"Restore", func() error {
			_, err := s.Restore(ctx, rec, append(sampleEntries(), textEntries("synced")...), nil)
			return err
		}},
		{"ConsumeOrRequest (request)", func() error {
			conf.Epoch = rec.Epoch // the owner's
			ok, _, err := s.ConsumeOrRequest(ctx, conf)
			if err == nil && ok {
				err = errors.New("approved without an approval")
			}
			return err
		}},
		{"ConsumeOrRequest (second request)", func() error {
			c2 := conf
			c2.Token, c2.ArgsDigest = "c_tok2", "d2"
			_, _, err := s.ConsumeOrRequest(ctx, c2)
			return err
		}},
		{"Pending", func() error {
			p, err := s.Pending(ctx, rec.ID)
			if err == nil && len(p) != 2 {
				err = fmt.Errorf("%d pending, want 2", len(p))
			}
			return err
		}},
		{"Resolve (approve)", func() error {
			_, err := s.Resolve(ctx, rec.ID, rec.Epoch, rec.UserID, conf.Token, true, time.Minute)
			return err
		}},
		{"Resolve (deny)", func() error {
			_, err := s.Resolve(ctx, rec.ID, rec.Epoch, rec.UserID, "c_tok2", false, time.Minute)
			return err
		}},
		{"ConsumeOrRequest (consume the approval)", func() error {
			ok, _, err := s.ConsumeOrRequest(ctx, conf)
			if err == nil && !ok {
				err = errors.New("the approval was not consumed")
			}
			return err
		}},
		{"Revoke (another user's revoke leaves the approval)", func() error {
			if err := approve(); err != nil {
				return err
			}
			if err := s.Revoke(ctx, rec.ID, rec.Epoch, "someone else", conf.Tool, conf.ArgsDigest); err != nil {
				return err
			}
			ok, _, err := s.ConsumeOrRequest(ctx, conf)
			if err == nil && !ok {
				err = errors.New("another user's revoke withdrew the user's approval")
			}
			return err
		}},
		{"Revoke (an approval withdrawn is not consumed)", func() error {
			if err := approve(); err != nil {
				return err
			}
			if err := s.Revoke(ctx, rec.ID, rec.Epoch, rec.UserID, conf.Tool, conf.ArgsDigest); err != nil {
				return err
			}
			ok, _, err := s.ConsumeOrRequest(ctx, conf)
			if err == nil && ok {
				err = errors.New("a withdrawn approval was consumed")
			}
			return err
		}},
		{"Claim", func() error {
			_, err := s.Claim(ctx, rec.ID, rec.Epoch, []orchestrator.CallRecord{
				{ID: "call-1", Tool: "kb_search", Turn: 2, State: orchestrator.StateClaimed},
				{ID: "call-2", Tool: "kb_get", Turn: 2, State: orchestrator.StateClaimed}})
			return err
		}},
		{"Answer", func() error {
			return s.Answer(ctx, rec.ID, rec.Epoch, []orchestrator.CallRecord{
				{ID: "call-1", Tool: "kb_search", Turn: 2, State: orchestrator.StateAnswered, Outcome: "ok"}})
		}},
		{"Ledger", func() error {
			l, err := s.Ledger(ctx, rec.ID)
			if err == nil && len(l) != 2 {
				err = fmt.Errorf("ledger %+v, want two calls", l)
			}
			return err
		}},
		{"Resume (after everything)", func() error {
			got, hist, err := s.Resume(ctx, rec.ID, tok, rec.UserID)
			if err == nil && (got.Turn != 2 || !reflect.DeepEqual(hist, append(sampleEntries(), textEntries("synced")...))) {
				err = fmt.Errorf("resumed turn %d history %v", got.Turn, hist)
			}
			return err
		}},
	}
	for _, op := range ops {
		if err := op.do(); err != nil {
			t.Errorf("%s on a cluster: %v", op.name, err)
		}
	}
	watch.mu.Lock()
	defer watch.mu.Unlock()
	for _, e := range watch.slotErr {
		t.Errorf("slot error: %s", e)
	}
	// The check is not vacuous: scripts, transactions and pipelines ran.
	if watch.names["evalsha"]+watch.names["eval"] < 6 || watch.names["get"] < 2 {
		t.Errorf("commands seen %v: the store's scripts and transactions did not all run", watch.names)
	}

	// Every key of the session is on one master, the user's on another.
	nodes := map[string]map[string]bool{}
	b := &backend{client: c}
	for _, k := range b.keys(t) {
		tag := k[strings.IndexByte(k, '{'):strings.IndexByte(k, '}')]
		if nodes[tag] == nil {
			nodes[tag] = map[string]bool{}
		}
		nodes[tag][cl.NodeFor(t, k)] = true
		if !strings.HasPrefix(k, "turnstile:{"+rec.ID+"}:") && !strings.HasPrefix(k, "turnstile:user:{"+rec.UserID+"}:") {
			t.Errorf("key %q carries neither the session's nor the user's hash tag", k)
		}
	}
	if len(nodes) != 2 {
		t.Errorf("keys under %d hash tags, want the session's and the user's: %v", len(nodes), nodes)
	}
	for tag, on := range nodes {
		if len(on) != 1 {
			t.Errorf("keys of %s} are spread over %v", tag, on)
		}
	}
}
