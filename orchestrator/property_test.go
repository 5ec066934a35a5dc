package orchestrator_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/transport"
)

// Exactly-once answers under randomised interleavings of calls, refusals,
// slow handlers, duplicate IDs and concurrent cancellations (field notes 1
// and 2). The ground truth of whether a cancellation took effect is the
// call's ledger record in Redis: finish records the state after the call's
// last transition, and a cancellation can only land before it.

// propertyBudget bounds the whole property run.
const propertyBudget = 20 * time.Second

// handleBound bounds one Handle: the slowest call planned is a 20 ms
// timeout; the rest is headroom for -race on a loaded machine.
const handleBound = 2 * time.Second

func TestExactlyOnceAnswersUnderRandomInterleavings(t *testing.T) {
	f := newFixture(t)
	r := newRedisStores(t)
	o := f.with(orchestrator.Config{StoreTimeout: 2 * time.Second}, r.deps())

	iterations := 300
	if testing.Short() {
		iterations = 50
	}
	base := rand.Uint64()
	if s := os.Getenv("ORCH_PROPERTY_SEED"); s != "" {
		var err error
		if base, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("ORCH_PROPERTY_SEED: %v", err)
		}
	}
	t.Logf("base seed %d (iteration i uses seed base+i; set ORCH_PROPERTY_SEED to replay)", base)
	deadline := time.Now().Add(propertyBudget)
	done := 0
	for i := range iterations {
		if time.Now().After(deadline) {
			break
		}
		seed := base + uint64(i)
		if !runInterleaving(t, o, r, seed) {
			t.Fatalf("iteration %d failed; replay with ORCH_PROPERTY_SEED=%d", i, seed)
		}
		done++
	}
	t.Logf("%d interleavings checked", done)
	if done < min(iterations, 20) {
		t.Errorf("only %d interleavings ran within %v", done, propertyBudget)
	}
}

// plannedCall is one call of a message with the kind that made it.
type plannedCall struct {
	c    orchestrator.Call
	kind string
}

// plan draws a turn: its mode, its messages, and the cancellation bursts.
type plan struct {
	mode     protocol.Mode
	messages [][]plannedCall
	ids      []string // every distinct id, in first-seen order
	bursts   []burst
}

type burst struct {
	wait time.Duration
	ids  []string // ids to cancel; nil with all set
	all  bool
}

func drawPlan(rng *rand.Rand) plan {
	p := plan{mode: tools.ModeText}
	if rng.IntN(2) == 0 {
		p.mode = tools.ModeVoice
	}
	n := 0
	for range 1 + rng.IntN(3) {
		var msg []plannedCall
		for range 1 + rng.IntN(6) {
			id := fmt.Sprintf("c%d", n)
			if len(p.ids) > 0 && rng.IntN(7) == 0 {
				id = p.ids[rng.IntN(len(p.ids))] // a duplicate id
			} else {
				n++
				p.ids = append(p.ids, id)
			}
			msg = append(msg, drawCall(rng, id, n))
		}
		p.messages = append(p.messages, msg)
	}
	for range rng.IntN(4) {
		b := burst{wait: time.Duration(rng.IntN(3000)) * time.Microsecond, all: rng.IntN(8) == 0}
		if !b.all {
			for range 1 + rng.IntN(3) {
				if rng.IntN(5) == 0 {
					b.ids = append(b.ids, "ghost")
				} else {
					b.ids = append(b.ids, p.ids[rng.IntN(len(p.ids))])
				}
			}
		}
		p.bursts = append(p.bursts, b)
	}
	return p
}

func drawCall(rng *rand.Rand, id string, n int) plannedCall {
	kinds := []string{"noop", "sleepy", "sleepy", "unknown", "invalid", "search", "transfer", "hang_up", "finish", "quitter"}
	kind := kinds[rng.IntN(len(kinds))]
	if kind == "quitter" && rng.IntN(3) != 0 {
		kind = "sleepy" // keep the 20 ms timeouts rare
	}
	var c orchestrator.Call
	switch kind {
	case "noop":
		c = call(id, "noop", nil)
	case "sleepy":
		c = call(id, "sleepy", map[string]any{"ms": rng.IntN(4)})
	case "unknown":
		c = call(id, "no_such_tool", map[string]any{"x": n})
	case "invalid":
		c = call(id, "echo", map[string]any{"text": n})
	case "search":
		c = call(id, "search", map[string]any{"query": fmt.Sprintf("q%d", rng.IntN(3))})
	case "transfer":
		c = call(id, "transfer", map[string]any{"amount": 1 + rng.IntN(3), "to": "alice"})
	case "hang_up":
		text := "bye"
		if rng.IntN(2) == 0 {
			text = "fail"
		}
		c = call(id, "hang_up", map[string]any{"text": text})
	case "finish":
		c = call(id, finishTool, nil)
	case "quitter":
		c = call(id, "quitter", nil)
	}
	return plannedCall{c: c, kind: kind}
}

// runInterleaving plays one drawn turn and checks its answers; false when
// a check failed (already reported).
func runInterleaving(t *testing.T, o *orchestrator.Orchestrator, r *redisStores, seed uint64) bool {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	p := drawPlan(rng)
	sessionID := fmt.Sprintf("prop-%d", seed)
	tr := o.NewTurn(r.session(t, sessionID, "u", p.mode), 1, nil)
	ok := true
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("seed %d (%s, %d messages): %s", seed, p.mode, len(p.messages), fmt.Sprintf(format, args...))
		ok = false
	}

	// Cancellations land at random moments while the turn runs and while
	// its answers are sent.
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, b := range p.bursts {
			time.Sleep(b.wait)
			if b.all {
				tr.CancelAll()
			} else {
				tr.Cancel(b.ids...)
			}
		}
	})

	answered := map[string]int{}
	sent := map[string]bool{}
	seen := map[string]bool{}
	for mi, msg := range p.messages {
		calls := make([]transport.FunctionCall, len(msg))
		for i, pc := range msg {
			calls[i] = transport.FunctionCall{ID: pc.c.ID, Name: pc.c.Name, Args: pc.c.Args}
		}
		start := time.Now()
		rd := tr.Round(context.Background(), calls, nil)
		if d := time.Since(start); d > handleBound {
			fail("message %d took %v", mi, d)
		}
		if len(rd.Results) != len(calls) {
			fail("message %d: %d results for %d calls", mi, len(rd.Results), len(calls))
			continue
		}
		for i, rs := range rd.Results {
			id := calls[i].ID
			if rs.Call.ID != id {
				fail("message %d result %d is for %s, want %s", mi, i, rs.Call.ID, id)
			}
			if rs.Send == seen[id] {
				fail("call %s (%s): send %v, duplicate %v", id, msg[i].kind, rs.Send, seen[id])
			}
			seen[id] = true
			if !rs.Send {
				continue
			}
			if rs.Outcome.Response == nil {
				fail("call %s (%s) has no response to pair with it", id, msg[i].kind)
			}
			sent[id] = true
		}
		for _, resp := range rd.Responses {
			answered[resp.ID]++
		}
	}
	wg.Wait()
	// A sender that retries, or answers duplicates, never gets a second go.
	for _, id := range append(p.ids, "ghost") {
		if tr.Answer(id) {
			answered[id]++
		}
	}

	recs := r.ledger(t, sessionID)
	durable := map[string]orchestrator.CallState{}
	for _, rec := range recs {
		if _, dup := durable[rec.ID]; dup {
			fail("two ledger records for %s", rec.ID)
		}
		durable[rec.ID] = rec.State
	}
	if len(recs) != len(p.ids) {
		fail("%d ledger records for %d distinct calls", len(recs), len(p.ids))
	}
	for _, id := range p.ids {
		cancelled := tr.State(id) == orchestrator.StateCancelled
		switch {
		case !sent[id]:
			fail("call %s was never offered for sending", id)
		case answered[id] > 1:
			fail("call %s answered %d times", id, answered[id])
		case cancelled && answered[id] != 0:
			fail("call %s was answered after being cancelled", id)
		case !cancelled && answered[id] != 1:
			fail("call %s (state %s) answered %d times, want exactly once", id, tr.State(id), answered[id])
		case (durable[id] == orchestrator.StateAnswered) != (answered[id] == 1):
			fail("call %s: durable state %s, answered %d times", id, durable[id], answered[id])
		}
	}
	if answered["ghost"] != 0 {
		fail("an unknown id was answered")
	}
	return ok
}
