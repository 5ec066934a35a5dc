package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/store"
)

// Fleet tests: gateways on a real Redis Cluster and a real Sentinel set
// that the tests start themselves (internal/redistest).

// TestTwoGatewaysOnARedisClusterShareOneSession: a session started on
// gateway A, on a three-master Redis Cluster, is resumed on gateway B with
// its history and its pending confirmation, which B's user approves; a
// block set on B holds on A.
func TestTwoGatewaysOnARedisClusterShareOneSession(t *testing.T) {
	cl := redistest.StartCluster(t)
	cfg := withPolicy(t, defaultTestConfig(t), confirmKBGet)
	cfg.RedisURL, cfg.RedisMode = gateway.SecretURL(cl.URL()), store.RedisCluster
	cfg.RedisWaitReplicas = 0 // the test cluster has no replicas to wait for
	// Far above a healthy call's bound: the test counts Redis errors, and on
	// a busy machine a starved process is not an unhealthy cluster.
	cfg.RedisTimeout = 5 * time.Second
	cfg.AuthSecret = gateway.Secret(strings.Repeat("k", 32))
	alice := bearer(t, cfg, "alice")

	brainA := fakegemini.NewScript(textStep("Beans ship in two days."),
		callStep(getCall("shipping")), textStep("I need your approval first."))
	brainB := fakegemini.NewScript(callStep(getCall("shipping")), textStep("Shipping: two days, tracked."),
		callStep(fakegemini.Call{Name: "ignore_user", Args: map[string]any{"duration_seconds": 600, "reason": "abuse"}}),
		textStep("Goodbye."))
	a := startGateway(t, cfg, brainA)
	b := startGateway(t, cfg, brainB)

	c := a.dial("", alice)
	ready := c.start(nil)
	c.ask("How fast do you ship?")
	req := askForConfirmation(t, c)
	_ = c.c.CloseNow()

	c2 := b.dial("", alice)
	again := c2.start(map[string]any{"resume": map[string]any{
		"sessionId": ready.str("sessionId"), "resumeToken": ready.str("resumeToken")}})
	if again["resumed"] != true || again["turn"] != float64(2) {
		t.Fatalf("resume on gateway B: %v", again)
	}
	var said []string
	for _, h := range again["history"].([]any) {
		item := h.(map[string]any)
		said = append(said, fmt.Sprint(item["role"], ":", item["text"]))
	}
	if got, want := strings.Join(said, "|"), "user:How fast do you ship?|model:Beans ship in two days.|"+
		"user:read me the shipping article|model:I need your approval first."; got != want {
		t.Fatalf("history on B = %q, want %q", got, want)
	}
	pending, _ := again["pendingConfirmations"].([]any)
	if len(pending) != 1 || pending[0].(map[string]any)["token"] != req.str("token") {
		t.Fatalf("pending confirmations on B = %v, want the one asked on A", again["pendingConfirmations"])
	}

	// The approval given on B lets B's model run the call.
	confirm(c2, req.str("token"), true)
	evs := confirmationTurn(t, c2, req.str("token"), "approved")
	if res := ofType(evs, "tool.result"); len(res) != 1 || res[0]["ok"] != true || res[0]["name"] != "kb_get" {
		t.Fatalf("the approved call on B: %v", res)
	}

	// A block set on B (the user's key, on its own hash tag) holds on A.
	evs = c2.ask("you are useless")
	blocked := ofType(evs, "blocked")
	if len(blocked) != 1 {
		t.Fatalf("ignore_user on B: %v", evs)
	}
	nc := a.dial("", alice)
	nc.send(map[string]any{"type": "session.start"})
	if ev := nc.next(); ev.typ() != "blocked" || ev.str("until") != blocked[0].str("until") {
		t.Fatalf("alice on A after the block on B: %v", ev)
	}
	if code := nc.expectClose(); code != 4003 {
		t.Fatalf("closed %d, want 4003", code)
	}
	for name, g := range map[string]*testGateway{"A": a, "B": b} {
		if n := g.counterSum("turnstile_redis_errors_total"); n != 0 {
			t.Errorf("gateway %s counted %v Redis errors on a healthy cluster", name, n)
		}
	}
}

// echoBrain answers every text turn with what the user said.
type echoBrain struct{}

func (echoBrain) Respond(_ context.Context, req *fakegemini.Request) fakegemini.Reply {
	return fakegemini.TextReply("noted: "+lastUserText(req), 1)
}

// TestSentinelFailoverMidConversation: a conversation goes on while the
// sentinel promotes the replica; every turn ends normally, /readyz is back
// within 30 s, and every message that got turn.start is in the history a
// resume on another gateway sees.
func TestSentinelFailoverMidConversation(t *testing.T) {
	set := redistest.StartSentinel(t)
	cfg := unlimited(defaultTestConfig(t)) // as many turns as the failover lets through
	cfg.RedisURL, cfg.RedisMode = gateway.SecretURL(set.URL()), store.RedisSentinel
	cfg.RedisWaitReplicas = store.DefaultWaitReplicas(store.RedisSentinel)
	cfg.HistoryMax = 5000       // every turn of the test stays in the history
	cfg.ResumeHistoryMax = 5000 // and comes back in session.ready
	g := startGateway(t, cfg, echoBrain{})
	other := startGateway(t, cfg, echoBrain{})

	c := g.dial("", nil)
	ready := c.start(nil)
	var accepted []string // user messages the gateway answered with turn.start
	turn := func(i int) {
		t.Helper()
		text := fmt.Sprintf("message %d", i)
		evs := c.ask(text)
		if starts := ofType(evs, "turn.start"); len(starts) == 1 && starts[0].str("text") == text {
			accepted = append(accepted, text)
		}
		if r := last(evs).str("reason"); r != "end_turn" {
			t.Errorf("turn %d during the failover ended %q: %v", i, r, evs)
		}
	}
	for i := range 3 {
		turn(i)
	}

	failoverStart := time.Now()
	promoted := set.BeginFailover(t)
	// Turns go on while the sentinel switches masters.
	i := 3
	for ; time.Since(failoverStart) < 3*time.Second; i++ {
		turn(i)
	}
	set.AwaitFailover(t, promoted)
	testwait.For(t, "/readyz to recover after the failover", func() bool {
		code, _ := get(t, g.url+"/readyz")
		return code == http.StatusOK
	})
	t.Logf("%d turns while the sentinel switched masters; /readyz answered 200 %v after the failover began",
		i-3, time.Since(failoverStart).Round(time.Millisecond))
	for end := i + 3; i < end; i++ {
		turn(i)
	}
	if len(accepted) != i {
		t.Errorf("%d of %d messages got turn.start", len(accepted), i)
	}

	// Every accepted message is in Redis: a resume on another gateway sees it.
	_ = c.c.CloseNow()
	// The last turn's writes may still be landing; a lost message never will.
	testwait.ForNil(t, "every message that got turn.start in the history after the failover", func() error {
		c2 := other.dial("", nil)
		again := c2.start(map[string]any{"resume": map[string]any{
			"sessionId": ready.str("sessionId"), "resumeToken": ready.str("resumeToken")}})
		_ = c2.c.CloseNow()
		seen := map[string]bool{}
		hist, _ := again["history"].([]any)
		for _, h := range hist {
			if item := h.(map[string]any); item["role"] == "user" {
				seen[item["text"].(string)] = true
			}
		}
		// The gateway waits for a replica (WAIT, TURNSTILE_REDIS_WAIT_REPLICAS)
		// before turn.start, so no acknowledged message may be lost.
		var missing []string
		for _, m := range accepted {
			if !seen[m] {
				missing = append(missing, m)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("not in the history: %v", missing)
		}
		return nil
	})
}
