package gateway_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/gateway"
	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/store"
)

// End-to-end tests of the upstream-connect budget and the resume limits
// (issue 24, finding 1): however a client makes the gateway open Live
// connections, at most the budget is opened per minute, on one node and
// across two.

// budgetNode is a gateway and the fake Live model behind it, with the
// upstreams it opened taken (and drained) as they come.
type budgetNode struct {
	g      *testGateway
	script *fakegemini.LiveScript
	opened []*upstream
}

// take waits for the upstream the gateway said it opened (mode voice).
func (n *budgetNode) take(t *testing.T) {
	t.Helper()
	n.opened = append(n.opened, nextUpstream(t, n.script))
}

// connects is turnstile_upstream_connects_total{reason, outcome}.
func (n *budgetNode) connects(reason metrics.ConnectReason, outcome string) float64 {
	return testutil.ToFloat64(n.g.gw.sessions.Metrics.UpstreamConnects.WithLabelValues(string(reason), outcome))
}

// resumeOutcome resumes the session on n and reports what the browser was
// told about voice before its ping's pong: "voice" (the upstream was opened
// again), "rate_limited", or "" (the session stayed in text unasked).
func resumeOutcome(t *testing.T, n *budgetNode, user http.Header, ready event) (*wsClient, string) {
	t.Helper()
	c := n.g.dial("", user)
	back := c.start(map[string]any{"resume": map[string]any{"sessionId": ready.str("sessionId"),
		"resumeToken": ready.str("resumeToken")}})
	if back["resumed"] != true {
		t.Fatalf("resume: %v", back)
	}
	c.send(map[string]any{"type": "ping"})
	got := ""
	for ev := c.next(); ev.typ() != "pong"; ev = c.next() {
		switch {
		case ev.typ() == "mode" && ev.str("mode") == "voice" && ev.str("reason") == "resume":
			got = "voice"
			n.take(t)
		case ev.typ() == "error" && ev.str("code") == "rate_limited" && ev["retryable"] == true &&
			strings.Contains(ev.str("message"), "try voice again in"):
			got = "rate_limited"
		default:
			t.Fatalf("after a resume: unexpected %v", ev)
		}
	}
	return c, got
}

// resumeLoop resumes one voice session rounds times, going through nodes
// in turn, and returns the Live connections opened (the first, by
// session.start in voice, included) and the refusals the browser saw.
func resumeLoop(t *testing.T, nodes []*budgetNode, user http.Header, rounds int) (opened, refused int, last *wsClient) {
	t.Helper()
	c := nodes[0].g.dial("", user)
	ready := c.start(map[string]any{"mode": "voice"})
	if ev := c.next(); ev.typ() != "mode" || ev.str("mode") != "voice" {
		t.Fatalf("after session.start in voice: %v", ev)
	}
	nodes[0].take(t)
	opened = 1
	st := store.NewRedisStore(redisClientFor(t, nodes[0].g.cfg), store.RedisStoreOptions{})
	inVoice := func() {
		// A resume on another node reads the mode from Redis, where the
		// node that moved the session to voice writes it off its path.
		t.Helper()
		testwait.For(t, "the session's voice mode in Redis", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			rec, _, err := st.Load(ctx, ready.str("sessionId"))
			return err == nil && rec.Mode == "voice"
		})
	}
	inVoice()
	for i := range rounds {
		_ = c.c.CloseNow()
		var got string
		c, got = resumeOutcome(t, nodes[(i+1)%len(nodes)], user, ready)
		switch got {
		case "voice":
			inVoice()
			if refused > 0 {
				t.Fatalf("resume %d reopened voice after a refusal within the minute", i+1)
			}
			opened++
		case "rate_limited":
			refused++
		}
	}
	return opened, refused, c
}

// budgetConfig is a gateway on a real redis-server at addr with auth on,
// a connect budget of perSession per session, and no resume limit (the
// budget alone is under test).
func budgetConfig(t *testing.T, addr string, perSession, perUser int) gateway.Config {
	cfg := defaultTestConfig(t)
	cfg.RedisURL = gateway.SecretURL("redis://" + addr)
	cfg.AuthSecret = gateway.Secret(strings.Repeat("k", 32))
	cfg.LiveConnectsPerMinute, cfg.UserLiveConnectsPerMinute = perSession, perUser
	cfg.ResumesPerMinute, cfg.UserResumesPerMinute = 0, 0
	return cfg
}

func startBudgetNode(t *testing.T, cfg gateway.Config) *budgetNode {
	g, script := startVoiceGateway(t, cfg, fakegemini.NewScript(textStep("Still here, in text.")))
	return &budgetNode{g: g, script: script}
}

func TestResumingAVoiceSessionInALoopOpensAtMostTheBudgetOnOneNode(t *testing.T) {
	cfg := budgetConfig(t, redistest.Start(t), 3, 100)
	n := startBudgetNode(t, cfg)
	alice := bearer(t, cfg, "alice")

	opened, refused, c := resumeLoop(t, []*budgetNode{n}, alice, 12)
	if opened != 3 {
		t.Fatalf("%d Live connections opened for 13 starts and resumes in a minute, want the budget, 3", opened)
	}
	if refused == 0 {
		t.Fatal("the browser was never told rate_limited")
	}
	noUpstream(t, n.script)
	if got := len(n.opened); got != 3 {
		t.Fatalf("the fake Live model saw %d connections, want 3", got)
	}
	if o, r := n.connects(metrics.ConnectResume, metrics.ConnectOpened), n.connects(metrics.ConnectVoiceStart, metrics.ConnectOpened); o != 2 || r != 1 {
		t.Fatalf("upstream_connects_total opened: resume %v, voice_start %v; want 2 and 1", o, r)
	}
	if got := n.connects(metrics.ConnectResume, metrics.ConnectRefused); got != float64(refused) {
		t.Fatalf("upstream_connects_total{resume,refused} = %v, want the %d refusals", got, refused)
	}
	if got := n.g.refusals("live_connects_per_minute"); got != float64(refused) {
		t.Fatalf("refusals{live_connects_per_minute} = %v, want %d", got, refused)
	}

	// The session goes on in text; asking for voice again is refused too.
	if evs := c.ask("are you there?"); last(evs).str("reason") != "end_turn" ||
		!strings.Contains(last(ofType(evs, "text.done")).str("text"), "in text") {
		t.Fatalf("a text turn after the refusals: %v", evs)
	}
	c.send(map[string]any{"type": "voice.start"})
	if ev := c.next(); ev.typ() != "error" || ev.str("code") != "rate_limited" {
		t.Fatalf("voice.start over the budget: %v, want rate_limited", ev)
	}
	noUpstream(t, n.script)
}

func TestResumingAVoiceSessionAcrossTwoGatewaysOpensAtMostTheBudget(t *testing.T) {
	cfg := budgetConfig(t, redistest.Start(t), 3, 100)
	a, b := startBudgetNode(t, cfg), startBudgetNode(t, cfg)
	alice := bearer(t, cfg, "alice")

	opened, refused, _ := resumeLoop(t, []*budgetNode{a, b}, alice, 12)
	if opened != 3 || refused == 0 {
		t.Fatalf("alternating resumes over two gateways opened %d Live connections (%d refusals), want the budget, 3",
			opened, refused)
	}
	noUpstream(t, a.script)
	noUpstream(t, b.script)
	if got := len(a.opened) + len(b.opened); got != 3 {
		t.Fatalf("the fake Live models saw %d connections, want 3", got)
	}
	// The first resume, on the other gateway, reopened voice there.
	if len(b.opened) == 0 {
		t.Fatal("a single resume on the other gateway did not reopen voice")
	}
}

func TestOneUsersSessionsShareTheConnectBudgetAcrossGateways(t *testing.T) {
	cfg := budgetConfig(t, redistest.Start(t), 10, 2)
	a, b := startBudgetNode(t, cfg), startBudgetNode(t, cfg)
	alice, bob := bearer(t, cfg, "alice"), bearer(t, cfg, "bob")
	inVoice := func(n *budgetNode, user http.Header) event {
		t.Helper()
		c := n.g.dial("", user)
		c.start(map[string]any{"mode": "voice"})
		return c.next()
	}
	for i, n := range []*budgetNode{a, b} {
		if ev := inVoice(n, alice); ev.typ() != "mode" || ev.str("mode") != "voice" {
			t.Fatalf("alice's session %d: %v, want voice", i+1, ev)
		}
		n.take(t)
	}
	// A third session of hers, on either gateway, stays in text.
	if ev := inVoice(a, alice); ev.typ() != "error" || ev.str("code") != "rate_limited" {
		t.Fatalf("alice's third session in voice: %v, want rate_limited", ev)
	}
	noUpstream(t, a.script)
	// Another user has a budget of their own.
	if ev := inVoice(b, bob); ev.typ() != "mode" || ev.str("mode") != "voice" {
		t.Fatalf("bob: %v, want voice", ev)
	}
	b.take(t)
}

func TestGoAwayOverTheBudgetEndsVoiceAndTheSessionGoesOnInText(t *testing.T) {
	cfg := budgetConfig(t, redistest.Start(t), 1, 100)
	n := startBudgetNode(t, cfg)
	c := n.g.dial("", bearer(t, cfg, "alice"))
	c.start(map[string]any{"mode": "voice"})
	if ev := c.next(); ev.str("mode") != "voice" {
		t.Fatalf("after session.start in voice: %v", ev)
	}
	n.take(t)
	u := n.opened[0]
	_, err := u.SendResumptionUpdate(true)
	must(t, err)
	must(t, u.SendGoAway(0))

	evs := c.until("mode")
	if m := last(evs); m.str("mode") != "text" || m.str("reason") != "rate_limited" {
		t.Fatalf("after a goAway over the budget: %v, want mode text rate_limited", m)
	}
	if errs := ofType(evs, "error"); len(errs) != 1 || errs[0].str("code") != "rate_limited" {
		t.Fatalf("errors = %v, want one rate_limited", errs)
	}
	u.waitEnded()
	noUpstream(t, n.script)
	if got := n.connects(metrics.ConnectGoAway, metrics.ConnectRefused); got != 1 {
		t.Fatalf("upstream_connects_total{go_away,refused} = %v, want 1", got)
	}
	if evs := c.ask("still there?"); last(evs).str("reason") != "end_turn" {
		t.Fatalf("a text turn after voice ended: %v", evs)
	}
}

// tryAgainIn finds the wait a rate_limited error gives.
var tryAgainIn = regexp.MustCompile(`try again in (\d+) s`)

func TestResumesPerMinuteHoldForASessionAcrossGateways(t *testing.T) {
	cfg := budgetConfig(t, redistest.Start(t), 0, 0)
	cfg.ResumesPerMinute, cfg.UserResumesPerMinute = 2, 100
	// Without the abuse cooldown the 4008 still says how long to wait: the
	// window's own wait.
	cfg.AbuseCooldown = store.CooldownPolicy{}
	a, b := startBudgetNode(t, cfg), startBudgetNode(t, cfg)
	alice := bearer(t, cfg, "alice")
	first := a.g.dial("", alice)
	ready := first.start(nil)
	resume := map[string]any{"sessionId": ready.str("sessionId"), "resumeToken": ready.str("resumeToken")}

	var holder *wsClient
	for i, n := range []*budgetNode{b, a} {
		holder = n.g.dial("", alice)
		if ev := holder.start(map[string]any{"resume": resume}); ev["resumed"] != true {
			t.Fatalf("resume %d: %v", i+1, ev)
		}
	}
	// The third within the minute is refused, before it takes anything over.
	third := b.g.dial("", alice)
	third.send(map[string]any{"type": "session.start", "resume": resume})
	ev := third.next()
	wait := tryAgainIn.FindStringSubmatch(ev.str("message"))
	if ev.typ() != "error" || ev.str("code") != "rate_limited" || wait == nil {
		t.Fatalf("third resume in a minute: %v, want rate_limited, try again in N s", ev)
	}
	_, err := third.read()
	expectCloseError(t, "the third resume", err, 4008, "; retry after "+wait[1]+" s") // as the error said
	if got := b.g.sessionsRefused("resumes_per_minute"); got != 1 {
		t.Fatalf("sessions_refused{resumes_per_minute} = %v, want 1", got)
	}
	holder.send(map[string]any{"type": "ping"})
	if ev := holder.next(); ev.typ() != "pong" {
		t.Fatalf("the connection holding the session after the refused resume: %v", ev)
	}
}
