package gateway_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/transport"
)

// TestIgnoreUserBlocksTheUserOnEveryGateway: the model's ignore_user blocks
// the user (not just the session) on every gateway that shares the Redis,
// and nobody else.
func TestIgnoreUserBlocksTheUserOnEveryGateway(t *testing.T) {
	cfg := tokenRedisConfig(t) // a real redis-server
	alice, bob := bearer(t, cfg, "alice"), bearer(t, cfg, "bob")

	brainA := fakegemini.NewScript(
		callStep(fakegemini.Call{Name: "ignore_user", Args: map[string]any{"duration_seconds": 600, "reason": "abuse"}}),
		textStep("I will not continue this conversation."),
		textStep("Hello Bob."),
	)
	brainB := fakegemini.NewScript(textStep("Hi Bob, how can I help?"))
	a := startGateway(t, cfg, brainA)
	b := startGateway(t, cfg, brainB)

	// Alice already has a session open on gateway B.
	onB := b.dial("", alice)
	onB.start(nil)

	c := a.dial("", alice)
	c.start(nil)
	readsOnB := redisCalls(t, b, "block")
	before := time.Now()
	evs := c.ask("you are useless")
	if res := ofType(evs, "tool.result"); len(res) != 1 || res[0]["ok"] != true || res[0]["name"] != "ignore_user" {
		t.Fatalf("ignore_user: %v", res)
	}
	blocked := ofType(evs, "blocked")
	if len(blocked) != 1 {
		t.Fatalf("no blocked event in the turn: %v", evs)
	}
	until, err := time.Parse(time.RFC3339, blocked[0].str("until"))
	if err != nil || until.Before(before.Add(599*time.Second)) || until.After(time.Now().Add(601*time.Second)) {
		t.Fatalf("blocked until %q (%v), want about 10 minutes from now", blocked[0].str("until"), err)
	}

	// Input on the same connection is refused, and never reaches the model.
	c.send(map[string]any{"type": "text", "text": "sorry?"})
	if ev := c.next(); ev.typ() != "error" || ev.str("code") != "blocked" || ev["retryable"] != false {
		t.Fatalf("text while blocked: %v, want error blocked", ev)
	}

	// Her open session on the other gateway is told at once, and refuses
	// her next input before asking its model anything.
	if ev := onB.next(); ev.typ() != "blocked" || ev.str("until") != blocked[0].str("until") {
		t.Fatalf("her session on gateway B after the block: %v, want blocked until %s", ev, blocked[0].str("until"))
	}
	// The announcement carried the block: gateway B did not read it back.
	if n := redisCalls(t, b, "block") - readsOnB; n != 0 {
		t.Fatalf("gateway B made %d Redis calls for the block it was told of, want none", n)
	}
	onB.send(map[string]any{"type": "text", "text": "let me try here"})
	if ev := onB.next(); ev.typ() != "error" || ev.str("code") != "blocked" {
		t.Fatalf("text on gateway B while blocked: %v, want error blocked", ev)
	}

	// A new connection of hers on gateway B is told, then closed 4003.
	nc := b.dial("", alice)
	nc.send(map[string]any{"type": "session.start"})
	if ev := nc.next(); ev.typ() != "blocked" || ev.str("until") != blocked[0].str("until") {
		t.Fatalf("new connection of a blocked user: %v, want blocked", ev)
	}
	if code := nc.expectClose(); code != 4003 {
		t.Fatalf("new connection of a blocked user closed %d, want 4003", code)
	}

	// Bob is not affected, on either gateway.
	for name, g := range map[string]*testGateway{"A": a, "B": b} {
		bc := g.dial("", bob)
		bc.start(nil)
		if evs := bc.ask("hello"); last(evs).str("reason") != "end_turn" || len(ofType(evs, "blocked")) != 0 {
			t.Fatalf("bob on gateway %s: %v", name, evs)
		}
	}
	if n := len(brainA.Requests()); n != 3 {
		t.Fatalf("gateway A's model called %d times, want 3 (two for alice's turn, one for bob)", n)
	}
	// Her text on B was refused before any model request: none started,
	// none cancelled.
	if n, cancelled := len(brainB.Requests()), b.cancelledModelRequests(); n != 1 || cancelled != 0 {
		t.Fatalf("gateway B's model called %d times with %v cancelled, want bob's only", n, cancelled)
	}
}

// TestInputRefusedForABlockOnAnotherGatewayStaysOutOfTheHistory: a text
// refused because the user was blocked on another node was never accepted
// (no turn.start), so, like a text refused with turn_in_progress, it must
// not be in the history the model and a resume will see, nor use up a turn.
func TestInputRefusedForABlockOnAnotherGatewayStaysOutOfTheHistory(t *testing.T) {
	cfg := tokenRedisConfig(t)
	alice := bearer(t, cfg, "alice")
	a := startGateway(t, cfg, fakegemini.NewScript(
		callStep(fakegemini.Call{Name: "ignore_user", Args: map[string]any{"duration_seconds": 60, "reason": "abuse"}}),
		textStep("Goodbye."),
	))
	b := startGateway(t, cfg, fakegemini.NewScript())

	onB := b.dial("", alice)
	ready := onB.start(nil)
	c := a.dial("", alice)
	c.start(nil)
	if evs := c.ask("you are useless"); len(ofType(evs, "blocked")) != 1 {
		t.Fatalf("no block: %v", evs)
	}
	onB.send(map[string]any{"type": "text", "text": "refused while blocked"})
	for ev := onB.next(); ev.typ() != "error"; ev = onB.next() {
		if ev.typ() == "turn.start" {
			t.Fatalf("blocked input started a turn: %v", ev)
		}
	}

	// What a resume (after the block ends) would find.
	rdb := redisClientFor(t, cfg)
	// The refused entry is taken back without holding up the browser:
	// poll until the store has caught up.
	st := store.NewRedisStore(rdb, store.RedisStoreOptions{})
	var (
		rec  store.Record
		hist []transport.Entry
	)
	testwait.For(t, "the refused message to leave the stored history", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var err error
		if rec, hist, err = st.Load(ctx, ready.str("sessionId")); err != nil {
			t.Fatal(err)
		}
		return !slices.ContainsFunc(hist, func(e transport.Entry) bool { return e.Text == "refused while blocked" })
	})
	if rec.Turn != 0 {
		t.Errorf("the refused message used up turn %d", rec.Turn)
	}
}

// TestTextOfABlockedUserStartsNoModelRequestBeforeTheBlockIsAnnounced: a
// block another node has stored but not yet announced (what Redis holds
// between the block's write and its announcement reaching this node) is
// found by the turn's own store round trip, and the typed text is refused
// before any model request: none reaches the model, none is started and
// cancelled. The block is written straight into Redis, as another node's
// BlockUser writes it, and never announced, so this node can learn of it
// only from the turn's round trip.
func TestTextOfABlockedUserStartsNoModelRequestBeforeTheBlockIsAnnounced(t *testing.T) {
	cfg := tokenRedisConfig(t)
	alice := bearer(t, cfg, "alice")
	brainA := fakegemini.NewScript(textStep("Hello Alice."))
	brainB := fakegemini.NewScript(textStep("Hello again, Alice."))
	a := startGateway(t, cfg, brainA)
	b := startGateway(t, cfg, brainB)

	onA, onB := a.dial("", alice), b.dial("", alice)
	onA.start(nil)
	onB.start(nil)

	// The block as gateway A's model would store it, unannounced.
	until := time.Now().Add(10 * time.Minute).UTC().Truncate(time.Second)
	rdb := redisClientFor(t, cfg)
	raw := mustJSON(t, map[string]any{"until": until.Format(time.RFC3339), "reason": "abuse", "untilMs": until.UnixMilli()})
	if err := rdb.Set(context.Background(), "turnstile:user:{alice}:block", raw, time.Until(until)).Err(); err != nil {
		t.Fatal(err)
	}

	for name, c := range map[string]*wsClient{"A": onA, "B": onB} {
		c.send(map[string]any{"type": "text", "text": "are you still there?"})
		ev := c.next()
		if ev.typ() == "blocked" { // the refusal tells the session of the block first
			ev = c.next()
		}
		if ev.typ() != "error" || ev.str("code") != "blocked" {
			t.Fatalf("text on gateway %s after an unannounced block: %v, want error blocked", name, ev)
		}
	}
	for name, g := range map[string]struct {
		gw    *testGateway
		brain *fakegemini.ScriptBrain
	}{"A": {a, brainA}, "B": {b, brainB}} {
		if n, cancelled := len(g.brain.Requests()), g.gw.cancelledModelRequests(); n != 0 || cancelled != 0 {
			t.Errorf("gateway %s: %d model requests reached the model, %v started and cancelled; want none",
				name, n, cancelled)
		}
	}
}
