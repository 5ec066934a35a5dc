package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/store"
)

// End-to-end tests of one owner per session across gateways sharing a
// real redis-server, and of sessions outliving a Redis that lost its data.

func sharedRedisConfig(t *testing.T) gateway.Config {
	t.Helper()
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + redistest.Start(t))
	return cfg
}

func resumeMsg(ready event) map[string]any {
	return map[string]any{"resume": map[string]any{
		"sessionId": ready.str("sessionId"), "resumeToken": ready.str("resumeToken")}}
}

func TestResumeOnAnotherGatewayClosesTheOldConnectionWithinASecond(t *testing.T) {
	cfg := sharedRedisConfig(t)
	release := make(chan struct{})
	brainA := fakegemini.NewScript(textStep("Beans ship in two days."),
		func(*fakegemini.Request) fakegemini.Reply { <-release; return fakegemini.TextReply("too late", 1) })
	brainB := fakegemini.NewScript(textStep("Yes, worldwide."))
	a := startGateway(t, cfg, brainA)
	b := startGateway(t, cfg, brainB)

	onA := a.dial("", nil)
	ready := onA.start(nil)
	onA.ask("How fast do you ship?")
	// A turn is running on A (its model is slow) when the browser, whose
	// connection to A looks dead to it, resumes on B.
	onA.send(map[string]any{"type": "text", "text": "And to Canada?"})
	if ev := onA.next(); ev.typ() != "turn.start" {
		t.Fatalf("slow turn: %v", ev)
	}
	onB := b.dial("", nil)
	again := onB.start(resumeMsg(ready))
	if again["resumed"] != true || again["turn"] != float64(2) {
		t.Fatalf("resume on B: %v", again)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for {
		_, _, err := onA.c.Read(ctx)
		if err == nil {
			continue
		}
		if code := websocket.CloseStatus(err); code != 4005 {
			t.Fatalf("the connection on A: %v, want close 4005 within a second", err)
		}
		break
	}
	close(release) // A's model answers only now: nothing of it may be stored

	evs := onB.ask("Internationally too?")
	if last(evs)["turn"] != float64(3) {
		t.Fatalf("turn on B: %v", last(evs))
	}
	// Redis holds one conversation: each turn once, in order, nothing from
	// A after B took over.
	st := store.NewRedisStore(redisClientFor(t, cfg), store.RedisStoreOptions{})
	testwait.For(t, "A to end", func() bool { return a.gw.sessions.Active() == 0 })
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	rec, hist, err := st.Load(ctx2, ready.str("sessionId"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range hist {
		got = append(got, fmt.Sprintf("%d:%s:%s", e.Turn, e.Role, e.Text))
	}
	want := "1:user:How fast do you ship?|1:model:Beans ship in two days.|2:user:And to Canada?|" +
		"3:user:Internationally too?|3:model:Yes, worldwide."
	if strings.Join(got, "|") != want || rec.Turn != 3 {
		t.Fatalf("stored conversation (turn %d):\n%s\nwant\n%s", rec.Turn, strings.Join(got, "|"), want)
	}
	for _, g := range []*testGateway{a, b} {
		if n := g.counterSum("turnstile_redis_errors_total"); n != 0 {
			t.Fatalf("redis_errors_total = %v on a healthy Redis", n)
		}
	}
}

func TestConcurrentResumesLeaveOneOwnerAndNoStoreErrors(t *testing.T) {
	cfg := sharedRedisConfig(t)
	a := startGateway(t, cfg, fakegemini.NewScript(textStep("first answer"), textStep("second answer")))
	b := startGateway(t, cfg, fakegemini.NewScript(textStep("second answer")))
	c := a.dial("", nil)
	ready := c.start(nil)
	c.ask("hello")
	_ = c.c.CloseNow()

	// Browsers that keep reading their sockets, as real ones do.
	type outcome struct {
		c     *wsClient
		evs   chan event // what it read, closed when its connection ended
		code  websocket.StatusCode
		ready bool
		pong  bool
		err   string
	}
	const n = 8
	out := make([]*outcome, n)
	for i := range out {
		g := a
		if i%2 == 1 {
			g = b
		}
		o := &outcome{c: g.dial("", nil), evs: make(chan event, 16)}
		out[i] = o
	}
	for _, o := range out {
		go func() {
			defer close(o.evs)
			for {
				ev, err := o.c.read()
				if err != nil {
					o.code = websocket.CloseStatus(err)
					return
				}
				o.evs <- ev
			}
		}()
	}
	for _, o := range out {
		msg := resumeMsg(ready)
		msg["type"] = "session.start"
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = o.c.c.Write(ctx, websocket.MessageText, mustMarshal(msg))
		}()
	}
	testwait.For(t, "one connection left", func() bool { return a.gw.sessions.Active()+b.gw.sessions.Active() == 1 })

	var survivor *outcome
	for _, o := range out {
		// Each ends with a close, 4005 (superseded, before or after its
		// session.ready) or 4004, except the owner, which answers a ping
		// and has its session.ready (the pong may come first: pings are
		// answered while session.start waits for the store).
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = o.c.c.Write(ctx, websocket.MessageText, []byte(`{"type":"ping"}`))
		cancel()
		for ev := range o.evs {
			o.ready = o.ready || ev.typ() == "session.ready"
			o.pong = o.pong || ev.typ() == "pong"
			if ev.typ() == "error" {
				o.err = ev.str("code")
			}
			if o.pong && o.ready {
				if survivor != nil {
					t.Fatal("two connections own the session")
				}
				survivor = o
				break
			}
		}
		if o.err == "store_unavailable" {
			t.Fatal("a concurrent resume was told the store is unavailable")
		}
		if o != survivor && o.code != 4005 && o.code != 4004 {
			t.Fatalf("a concurrent resume ended with close %d (error %q, ready %v); want 4005 or 4004", o.code, o.err, o.ready)
		}
	}
	if survivor == nil {
		t.Fatal("no resume won")
	}
	survivor.c.send(map[string]any{"type": "text", "text": "still there?"})
	for ev := range survivor.evs {
		if ev.typ() == "turn.done" {
			if ev["turn"] != float64(2) || ev.str("reason") != "end_turn" {
				t.Fatalf("the winner's turn: %v", ev)
			}
			break
		}
	}
	for _, g := range []*testGateway{a, b} {
		if n := g.counterSum("turnstile_redis_errors_total"); n != 0 {
			t.Fatalf("redis_errors_total = %v with a healthy Redis", n)
		}
		if lines := g.errors.all(); len(lines) != 0 {
			t.Fatalf("ERROR log lines with a healthy Redis: %q", lines)
		}
	}
}

func TestSessionsSurviveRedisLosingItsData(t *testing.T) {
	cfg := withPolicy(t, sharedRedisConfig(t), confirmKBGet)
	a := startGateway(t, cfg, fakegemini.NewScript(textStep("one"), textStep("two"),
		callStep(getCall("shipping")), textStep("I need your approval.")))
	b := startGateway(t, cfg, fakegemini.NewScript(textStep("three"), textStep("four")))

	c1 := a.dial("", nil)
	ready1 := c1.start(nil)
	c1.ask("first")
	c1.ask("second")
	token := askForConfirmation(t, c1).str("token")
	c2 := b.dial("", nil)
	ready2 := c2.start(nil)
	c2.ask("third")

	// Redis loses everything while both sessions are live and idle.
	rdb := redisClientFor(t, cfg)
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "both sessions written back", func() bool {
		return a.counterSum("turnstile_store_restorations_total") == 1 && b.counterSum("turnstile_store_restorations_total") == 1
	})

	// Each resumes on the other gateway with its whole history, and the
	// confirmation still waits for its answer.
	_ = c1.c.CloseNow()
	_ = c2.c.CloseNow()
	r1 := b.dial("", nil)
	again1 := r1.start(resumeMsg(ready1))
	if got := historyTexts(again1); got != "user:first|model:one|user:second|model:two|user:read me the shipping article|model:I need your approval." {
		t.Fatalf("session 1 after Redis lost its data: %q", got)
	}
	pending, _ := again1["pendingConfirmations"].([]any)
	if len(pending) != 1 || pending[0].(map[string]any)["token"] != token {
		t.Fatalf("pending confirmations after Redis lost its data: %v", again1["pendingConfirmations"])
	}
	r2 := a.dial("", nil)
	again2 := r2.start(resumeMsg(ready2))
	if got := historyTexts(again2); got != "user:third|model:three" {
		t.Fatalf("session 2 after Redis lost its data: %q", got)
	}
	if evs := r2.ask("fourth"); last(evs)["turn"] != float64(2) {
		t.Fatalf("turn after the restoration: %v", last(evs))
	}
}

// A resume this connection was not told of (the epoch moved on in Redis,
// its announcement missed): the old connection's answer to a confirmation
// is refused by the store and ends that connection (4005), as a fenced
// history write does; the confirmation still waits for the new owner.
func TestConfirmationAnsweredOnATakenOverConnectionIsRefused(t *testing.T) {
	cfg := withPolicy(t, sharedRedisConfig(t), confirmKBGet)
	a := startGateway(t, cfg, fakegemini.NewScript(callStep(getCall("shipping")), textStep("I need your approval.")))
	c := a.dial("", nil)
	id := c.start(nil).str("sessionId")
	token := askForConfirmation(t, c).str("token")
	rdb := redisClientFor(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.HIncrBy(ctx, "turnstile:{"+id+"}:meta", "epoch", 1).Err(); err != nil {
		t.Fatal(err)
	}

	confirm(c, token, true)
	for {
		ev, err := c.read()
		if err != nil {
			if code := websocket.CloseStatus(err); code != 4005 {
				t.Fatalf("the old connection after its answer: %v, want close 4005", err)
			}
			break
		}
		if ev.typ() == "confirm.done" || ev.typ() == "error" || ev.typ() == "turn.start" {
			t.Fatalf("the old connection's answer was taken: %v", ev)
		}
	}
	st := store.NewRedisStore(rdb, store.RedisStoreOptions{})
	if p, err := st.Pending(ctx, id); err != nil || len(p) != 1 || p[0].Token != token {
		t.Fatalf("pending after the refused answer: %+v, %v; want it still waiting", p, err)
	}
	if keys, err := rdb.Keys(ctx, "turnstile:{"+id+"}:approved:*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("approvals stored: %v, %v; want none", keys, err)
	}
	testwait.For(t, "the old connection to end", func() bool { return a.gw.sessions.Active() == 0 })
	if n := a.counterSum("turnstile_redis_errors_total"); n != 0 {
		t.Fatalf("redis_errors_total = %v: a fenced write is not a store failure", n)
	}
	if lines := a.errors.all(); len(lines) != 0 {
		t.Fatalf("ERROR log lines for a fenced write: %q", lines)
	}
}

// historyTexts is session.ready's history as role:text|….
func historyTexts(ready event) string {
	var out []string
	items, _ := ready["history"].([]any)
	for _, it := range items {
		m := it.(map[string]any)
		out = append(out, m["role"].(string)+":"+m["text"].(string))
	}
	return strings.Join(out, "|")
}
