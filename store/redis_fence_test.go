package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/transport"
)

func testFencing(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.store(RedisStoreOptions{})
	a, tok := mustCreateRecord(t, s, sampleRecord("s-fence"))
	a.Turn = 1
	if err := s.Append(ctx, a, textEntries("from A")...); err != nil {
		t.Fatal(err)
	}

	// B resumes: it owns the session now, with everything A wrote.
	bRec, hist := mustResume(t, s, a.ID, tok, a.UserID)
	if bRec.Epoch != a.Epoch+1 || !reflect.DeepEqual(hist, textEntries("from A")) {
		t.Fatalf("resume: epoch %d, history %v", bRec.Epoch, hist)
	}
	// Every write of A is refused from now on, and changes nothing.
	a.Turn = 2
	for name, write := range map[string]func() error{
		"append": func() error { return s.Append(ctx, a, textEntries("late from A")...) },
		"append with block": func() error {
			_, err := s.AppendWithBlock(ctx, a, textEntries("late from A")...)
			return err
		},
		"begin turn": func() error {
			_, err := s.BeginTurn(ctx, a, textEntries("late from A")[0], TurnLimit{Key: a.UserID, Max: 5})
			return err
		},
		"undo":    func() error { return s.Undo(ctx, a, 1) },
		"restore": func() error { _, err := s.Restore(ctx, a, textEntries("rewrite by A"), nil); return err },
	} {
		if err := write(); !errors.Is(err, ErrFenced) {
			t.Errorf("%s by the old owner: %v, want ErrFenced", name, err)
		}
	}
	bRec.Turn = 2
	if err := s.Append(ctx, bRec, textEntries("from B")...); err != nil {
		t.Fatalf("append by the new owner: %v", err)
	}
	got, hist, err := s.Load(ctx, a.ID)
	if err != nil || got.Epoch != bRec.Epoch || !reflect.DeepEqual(hist, textEntries("from A", "from B")) {
		t.Fatalf("stored: epoch %d, history %v, %v; want one conversation", got.Epoch, hist, err)
	}

	// Concurrent resumes all succeed in turn, each with its own epoch: the
	// latest owns the session.
	var wg sync.WaitGroup
	epochs := make([]int64, 8)
	for i := range epochs {
		wg.Go(func() {
			rec, _, err := s.Resume(ctx, a.ID, tok, a.UserID)
			if err != nil {
				t.Errorf("concurrent resume: %v", err)
			}
			epochs[i] = rec.Epoch
		})
	}
	wg.Wait()
	seen := map[int64]bool{}
	var newest int64
	for _, e := range epochs {
		if seen[e] {
			t.Fatalf("two resumes got epoch %d: %v", e, epochs)
		}
		seen[e] = true
		newest = max(newest, e)
	}
	if got, err := s.Epochs(ctx, []string{a.ID, "s-none"}); err != nil || got[0] != newest || got[1] != 0 {
		t.Fatalf("epochs = %v, %v; want [%d 0]", got, err, newest)
	}

	// Redis loses the session; the old owner, not told yet, writes it back
	// first. The owner's next append finds a stale record (ErrSessionGone)
	// and writes the session back over it; the old owner is then refused.
	b.flush(t) // every server: a cluster client's FLUSHALL reaches one
	if restored, err := s.Restore(ctx, a, textEntries("A's view"), nil); err != nil || !restored {
		t.Fatalf("restore by the old owner: %v, %v", restored, err)
	}
	owner := bRec
	owner.Epoch = newest
	if err := s.Append(ctx, owner, textEntries("from the owner")...); !errors.Is(err, ErrSessionGone) {
		t.Fatalf("append over an older owner's restore: %v, want ErrSessionGone", err)
	}
	if _, err := s.Restore(ctx, owner, textEntries("from A", "from B", "from the owner"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restore(ctx, a, textEntries("A's view"), nil); !errors.Is(err, ErrFenced) {
		t.Fatalf("the old owner after the owner's restore: %v, want ErrFenced", err)
	}
	if _, hist, err := s.Load(ctx, a.ID); err != nil || len(hist) != 3 {
		t.Fatalf("after both restores: %v, %v", hist, err)
	}
}

func testBeginTurn(t *testing.T, b *backend) {
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	s := b.store(RedisStoreOptions{Now: clock})
	rec, tok := mustCreateRecord(t, s, sampleRecord("s-turns"))
	other, _ := mustCreateRecord(t, s, sampleRecord("s-turns-2")) // the same user's other session
	lim := TurnLimit{Key: "alice", Max: 2, Window: time.Minute}

	begin := func(r *Record, text string) TurnStart {
		t.Helper()
		r.Turn++
		ts, err := s.BeginTurn(ctx, *r, transport.Entry{Role: transport.RoleUser, Text: text, Turn: r.Turn}, lim)
		if err != nil {
			t.Fatalf("begin turn %q: %v", text, err)
		}
		return ts
	}
	// A Redis that restarted has forgotten the scripts: the pipelined
	// calls find out and run again.
	if err := b.client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if ts := begin(&rec, "one"); !ts.Allowed {
		t.Fatalf("first turn refused: %+v", ts)
	}
	advance(10 * time.Second)
	if ts := begin(&other, "two, elsewhere"); !ts.Allowed {
		t.Fatalf("second turn refused: %+v", ts)
	}
	advance(10 * time.Second)
	ts := begin(&rec, "three")
	if ts.Allowed || ts.RetryAfter != 40*time.Second {
		t.Fatalf("third turn in a minute: %+v, want refused for 40s", ts)
	}
	// The refused turn is taken back.
	rec.Turn--
	if err := s.Undo(ctx, rec, rec.Turn+1); err != nil {
		t.Fatal(err)
	}
	if got, hist := mustResume(t, s, rec.ID, tok, rec.UserID); got.Turn != 1 ||
		!reflect.DeepEqual(hist, []transport.Entry{{Role: transport.RoleUser, Text: "one", Turn: 1}}) {
		t.Fatalf("after undo: turn %d, history %v", got.Turn, hist)
	}
	rec.Epoch++

	// A refused turn did not count: once the first turn leaves the window,
	// one more is allowed.
	advance(40 * time.Second)
	if ts := begin(&rec, "four"); !ts.Allowed {
		t.Fatalf("turn after the window moved: %+v", ts)
	}
	if ok, _, err := s.CountTurn(ctx, lim, "typed-in-voice"); err != nil || ok {
		t.Fatalf("count turn at the limit = %v, %v; want refused", ok, err)
	}
	if ok, _, err := s.CountTurn(ctx, TurnLimit{Key: "bob", Max: 2}, "x"); err != nil || !ok {
		t.Fatalf("another user's turn = %v, %v; want allowed", ok, err)
	}

	// The block is read in the same round trip.
	until := now.Add(time.Hour).Truncate(time.Second)
	if err := s.BlockUser(ctx, "alice", Block{Until: until, Reason: "abuse"}); err != nil {
		t.Fatal(err)
	}
	if ts := begin(&rec, "five"); !ts.Block.Until.Equal(until) {
		t.Fatalf("block not read with the turn: %+v", ts)
	}
}

// ownerLog is a Watcher that records what it hears.
type ownerLog struct {
	mu     sync.Mutex
	owners []string
	checks int
	lost   int
}

func (o *ownerLog) Lost() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lost++
}

func (o *ownerLog) lostCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lost
}

func (o *ownerLog) Owner(id string, epoch int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.owners = append(o.owners, id+"@"+strconv.FormatInt(epoch, 10))
}

func (o *ownerLog) Closed(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.owners = append(o.owners, "closed:"+id)
}

func (o *ownerLog) HandedBack(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.owners = append(o.owners, "handback:"+id)
}

func (o *ownerLog) BlockChanged(user string, b *Block) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if b == nil {
		o.owners = append(o.owners, "block:"+user+" (to read)")
		return
	}
	o.owners = append(o.owners, "block:"+user+" until "+b.Until.UTC().Format(time.RFC3339)+" "+b.Reason)
}

func (o *ownerLog) Check() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.checks++
}

func (o *ownerLog) state() ([]string, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.owners...), o.checks
}

// startWatch runs s's watch for node-a into a log until the test ends,
// and returns once an announcement is certain to be heard: after two
// checks (of no sessions yet) — the first probe finds no marker, and Redis
// confirms the subscription; on a busy machine the marker's check can
// come first, while the subscription is still on its way.
func startWatch(t *testing.T, s *RedisStore) *ownerLog {
	t.Helper()
	w := new(ownerLog)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Watch(ctx, "node-a", w) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watch: %v", err)
		}
	})
	testwait.For(t, "the subscription", func() bool { _, n := w.state(); return n >= 2 })
	return w
}

func testWatch(t *testing.T, b *backend) {
	s := b.store(RedisStoreOptions{WatchInterval: 50 * time.Millisecond})
	w := startWatch(t, s)

	// The channel is shared: an announcement of an earlier test's session
	// can still be on its way (a cluster passes PUBLISH between its nodes
	// on the bus, late on a busy machine), so this test listens for its own
	// session, named afresh each run, and the epoch its resume took.
	id := "s-watched-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	defer func() {
		if t.Failed() {
			owners, checks := w.state()
			t.Logf("heard %v after %d checks", owners, checks)
		}
	}()
	rec, tok := mustCreateRecord(t, s, sampleRecord(id))
	resumed, _ := mustResume(t, s, rec.ID, tok, rec.UserID)
	want := id + "@" + strconv.FormatInt(resumed.Epoch, 10)
	testwait.For(t, "the owner announcement", func() bool {
		owners, _ := w.state()
		return slices.Contains(owners, want)
	})
	if owners, _ := w.state(); slices.ContainsFunc(owners, func(o string) bool {
		return strings.HasPrefix(o, id+"@") && o != want
	}) {
		t.Fatalf("heard %v; want %s announced once, with the epoch its resume took", owners, want)
	}

	// The node's own first marker is not lost data.
	if n := w.lostCount(); n != 0 {
		t.Fatalf("Lost heard %d times before Redis lost anything", n)
	}

	// Redis loses its data: the node hears it, and is asked to check its
	// sessions.
	_, before := w.state()
	b.flush(t) // every server: a cluster client's FLUSHALL reaches one
	testwait.For(t, "a check after the flush", func() bool { _, n := w.state(); return n > before })
	testwait.For(t, "Lost after the flush", func() bool { return w.lostCount() >= 1 })
}

// testMarkerGone: a node whose marker its Watch set learns at once, without
// waiting for Watch, that Redis lost it; a node that never set one is not
// told anything.
func testMarkerGone(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.store(RedisStoreOptions{})
	if gone, err := s.MarkerGone(ctx, "node-b"); err != nil || gone {
		t.Fatalf("marker of a node never marked: gone %v, %v; want false", gone, err)
	}
	if _, err := s.touchMarker(ctx, "node-b"); err != nil {
		t.Fatal(err)
	}
	if gone, err := s.MarkerGone(ctx, "node-b"); err != nil || gone {
		t.Fatalf("marker just set: gone %v, %v; want false", gone, err)
	}
	b.flush(t)
	if gone, err := s.MarkerGone(ctx, "node-b"); err != nil || !gone {
		t.Fatalf("marker after Redis lost its data: gone %v, %v; want true", gone, err)
	}
}

// The orchestrator's writes of a session (its call ledger and its
// confirmations) are fenced like the session's own: each script first
// compares the writer's epoch with the meta hash's, as the append script
// does. takeOver creates a session as A, lets B resume it, and returns
// both owners' records (A's epoch is the stale one).
func takeOver(t *testing.T, s *RedisStore, id string, before func(a Record)) (a, b Record) {
	t.Helper()
	a, tok := mustCreateRecord(t, s, sampleRecord(id))
	if before != nil {
		before(a)
	}
	b, _ = mustResume(t, s, a.ID, tok, a.UserID)
	if b.Epoch != a.Epoch+1 {
		t.Fatalf("resume took epoch %d after %d", b.Epoch, a.Epoch)
	}
	return a, b
}

// contents is everything stored, keys and values, in a stable order, to
// show that a refused write changed nothing.
func (b *backend) contents(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for _, k := range b.keys(t) {
		var vals []string
		switch typ := b.client.Type(ctx, k).Val(); typ {
		case "hash":
			for f, v := range b.client.HGetAll(ctx, k).Val() {
				vals = append(vals, f+"="+v)
			}
			slices.Sort(vals)
		case "list":
			vals = b.client.LRange(ctx, k, 0, -1).Val()
		case "set":
			vals = b.client.SMembers(ctx, k).Val()
			slices.Sort(vals)
		case "string":
			vals = []string{b.client.Get(ctx, k).Val()}
		case "zset":
			vals = b.client.ZRange(ctx, k, 0, -1).Val()
		default:
			t.Fatalf("key %s has unexpected type %q", k, typ)
		}
		out = append(out, k+": "+strings.Join(vals, ", "))
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// refusedUnchanged checks that write returns ErrFenced and leaves Redis as
// it was.
func refusedUnchanged(t *testing.T, b *backend, what string, write func() error) {
	t.Helper()
	before := b.contents(t)
	if err := write(); !errors.Is(err, ErrFenced) {
		t.Fatalf("%s by the old owner: %v, want ErrFenced", what, err)
	}
	if after := b.contents(t); after != before {
		t.Fatalf("%s by the old owner changed Redis:\n%s\nwas\n%s", what, after, before)
	}
}

func claims(turn int, ids ...string) []orchestrator.CallRecord {
	var out []orchestrator.CallRecord
	for _, id := range ids {
		out = append(out, orchestrator.CallRecord{ID: id, Tool: "kb_search", Turn: turn, State: orchestrator.StateClaimed})
	}
	return out
}

// ledger_claim.lua
func testFencedClaim(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.store(RedisStoreOptions{})
	a, owner := takeOver(t, s, "s-claim", func(a Record) {
		if _, err := s.Claim(ctx, a.ID, a.Epoch, claims(1, "c1")); err != nil {
			t.Fatalf("claim by the first owner: %v", err)
		}
	})
	refusedUnchanged(t, b, "claim", func() error {
		prior, err := s.Claim(ctx, a.ID, a.Epoch, claims(2, "c1", "c2"))
		if len(prior) != 0 {
			t.Errorf("a refused claim returned %v", prior)
		}
		return err
	})
	refusedUnchanged(t, b, "claim without an epoch", func() error {
		_, err := s.Claim(ctx, a.ID, 0, claims(2, "c2"))
		return err
	})
	// No record: nothing is claimed (the owner writes the session back).
	if _, err := s.Claim(ctx, "s-none", 1, claims(1, "c1")); !errors.Is(err, ErrSessionGone) {
		t.Fatalf("claim for a missing record: %v, want ErrSessionGone", err)
	}
	if recs, err := s.Ledger(ctx, "s-none"); err != nil || len(recs) != 0 {
		t.Fatalf("ledger of a missing record: %v, %v; want nothing", recs, err)
	}

	prior, err := s.Claim(ctx, owner.ID, owner.Epoch, claims(2, "c1", "c2"))
	if err != nil {
		t.Fatalf("claim by the owner: %v", err)
	}
	if len(prior) != 1 || prior["c1"].State != orchestrator.StateClaimed {
		t.Fatalf("owner's claim returned %v, want c1 claimed before", prior)
	}
	if recs, err := s.Ledger(ctx, owner.ID); err != nil || len(recs) != 2 || recs[1].ID != "c2" {
		t.Fatalf("ledger %+v, %v; want c1 and c2", recs, err)
	}
}

// ledger_answer.lua
func testFencedAnswer(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.store(RedisStoreOptions{})
	// A claimed the call, then lost the session; its answer is refused.
	a, owner := takeOver(t, s, "s-answer", func(a Record) {
		if _, err := s.Claim(ctx, a.ID, a.Epoch, claims(1, "c1")); err != nil {
			t.Fatalf("claim by the first owner: %v", err)
		}
	})
	answered := orchestrator.CallRecord{ID: "c1", Tool: "kb_search", Turn: 1, State: orchestrator.StateAnswered,
		Outcome: "ok", Response: map[string]any{"v": 1.0, "ok": true, "output": "found"}}
	refusedUnchanged(t, b, "answer", func() error { return s.Answer(ctx, a.ID, a.Epoch, []orchestrator.CallRecord{answered}) })

	if err := s.Answer(ctx, owner.ID, owner.Epoch, []orchestrator.CallRecord{answered}); err != nil {
		t.Fatalf("answer by the owner: %v", err)
	}
	if recs, err := s.Ledger(ctx, owner.ID); err != nil || len(recs) != 1 || recs[0].State != orchestrator.StateAnswered ||
		recs[0].Response["output"] != "found" {
		t.Fatalf("ledger %+v, %v; want c1 answered", recs, err)
	}
}

func transferConf(rec Record, token string) orchestrator.Confirmation {
	return orchestrator.Confirmation{Token: token, SessionID: rec.ID, Epoch: rec.Epoch, UserID: rec.UserID,
		Tool: "refund", ArgsDigest: "d1", Args: map[string]any{"amount": 3.0}, Turn: 1,
		ExpiresAt: time.Now().Add(time.Minute).Truncate(time.Second)}
}

// redis_confirm.lua
func testFencedConsumeOrRequest(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.store(RedisStoreOptions{})
	a, owner := takeOver(t, s, "s-confirm", nil)

	// A request by the old owner stores nothing.
	refusedUnchanged(t, b, "confirmation request", func() error {
		_, _, err := s.ConsumeOrRequest(ctx, transferConf(a, "c_old"))
		return err
	})
	if p, err := s.Pending(ctx, a.ID); err != nil || len(p) != 0 {
		t.Fatalf("pending after a refused request: %v, %v", p, err)
	}
	// The owner asks, and the user approves.
	if ok, _, err := s.ConsumeOrRequest(ctx, transferConf(owner, "c_new")); err != nil || ok {
		t.Fatalf("request by the owner: %v, %v; want pending", ok, err)
	}
	if _, err := s.Resolve(ctx, owner.ID, owner.Epoch, owner.UserID, "c_new", true, time.Minute); err != nil {
		t.Fatalf("approval by the owner: %v", err)
	}
	// The old owner cannot use that approval up.
	refusedUnchanged(t, b, "consuming the approval", func() error {
		ok, _, err := s.ConsumeOrRequest(ctx, transferConf(a, "c_old2"))
		if ok {
			t.Error("the old owner consumed the approval")
		}
		return err
	})
	if ok, _, err := s.ConsumeOrRequest(ctx, transferConf(owner, "c_new2")); err != nil || !ok {
		t.Fatalf("the owner's call after the approval: %v, %v; want it consumed", ok, err)
	}
}

// redis_resolve.lua
func testFencedResolve(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.store(RedisStoreOptions{})
	// A asked for a confirmation before B took the session over; B shows
	// it again (Pending), and only B's answer counts.
	a, owner := takeOver(t, s, "s-resolve", func(a Record) {
		if ok, _, err := s.ConsumeOrRequest(ctx, transferConf(a, "c_tok")); err != nil || ok {
			t.Fatalf("request by the first owner: %v, %v", ok, err)
		}
	})
	for _, approve := range []bool{true, false} {
		refusedUnchanged(t, b, fmt.Sprintf("answer (approve %v)", approve), func() error {
			_, err := s.Resolve(ctx, a.ID, a.Epoch, a.UserID, "c_tok", approve, time.Minute)
			return err
		})
	}
	if p, err := s.Pending(ctx, owner.ID); err != nil || len(p) != 1 || p[0].Token != "c_tok" {
		t.Fatalf("pending after refused answers: %+v, %v; want c_tok", p, err)
	}
	conf, err := s.Resolve(ctx, owner.ID, owner.Epoch, owner.UserID, "c_tok", true, time.Minute)
	if err != nil || conf.Tool != "refund" {
		t.Fatalf("answer by the owner: %+v, %v", conf, err)
	}
	if ok, _, err := s.ConsumeOrRequest(ctx, transferConf(owner, "c_tok2")); err != nil || !ok {
		t.Fatalf("the owner's call after its approval: %v, %v; want it consumed", ok, err)
	}
}

// slowLoss is an ownerLog whose Lost waits until released: the moment
// between Watch setting its marker again and its Watcher having heard Lost.
type slowLoss struct {
	ownerLog
	entered chan struct{}
	release chan struct{}
}

func (w *slowLoss) Lost() {
	close(w.entered)
	<-w.release
	w.ownerLog.Lost()
}

// testMarkerGoneUntilLostReturns: while Watch's Watcher is still hearing
// Lost (the marker is set again by then), MarkerGone says gone, so a node
// asking MarkerGone and then what Lost recorded cannot fall between the
// two; once Lost has returned, it says present.
func testMarkerGoneUntilLostReturns(t *testing.T, b *backend) {
	s := b.store(RedisStoreOptions{WatchInterval: 50 * time.Millisecond})
	w := &slowLoss{entered: make(chan struct{}), release: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Watch(ctx, "node-c", w) }()
	released := false
	defer func() {
		if !released {
			close(w.release)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watch: %v", err)
		}
	}()
	// The marker itself, not a first Check: the subscription's confirmation
	// may come first, and a flush before the first probe is no loss.
	testwait.For(t, "the first marker probe", func() bool {
		_, marked := s.marked.Load("node-c")
		return marked
	})

	b.flush(t)
	testwait.For(t, "the Watcher to hear Lost", func() bool {
		select {
		case <-w.entered:
			return true
		default:
			return false
		}
	})
	if n, err := b.client.Exists(context.Background(), nodeKey("node-c")).Result(); err != nil || n != 1 {
		t.Fatalf("marker while Lost runs: exists %d, %v; want set again", n, err)
	}
	if gone, err := s.MarkerGone(context.Background(), "node-c"); err != nil || !gone {
		t.Fatalf("MarkerGone while the Watcher hears Lost: %v, %v; want gone", gone, err)
	}
	close(w.release)
	released = true
	testwait.For(t, "Lost to return", func() bool { return w.lostCount() == 1 })
	testwait.For(t, "MarkerGone to say present", func() bool {
		gone, err := s.MarkerGone(context.Background(), "node-c")
		return err == nil && !gone
	})
}
