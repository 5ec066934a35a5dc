package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/transport"
)

// The durable call ledger: a claim records new IDs and returns the record
// of an ID seen before; an answer replaces a claim with the response; the
// ledger keeps the newest ledgerMax calls.
func testLedgerClaimAnswerAndTrim(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.store(RedisStoreOptions{})
	owner, _ := mustCreateRecord(t, s, sampleRecord("sess"))
	claim := func(ids ...string) map[string]orchestrator.CallRecord {
		t.Helper()
		var recs []orchestrator.CallRecord
		for _, id := range ids {
			recs = append(recs, orchestrator.CallRecord{ID: id, Tool: "kb_search", Turn: 1, State: orchestrator.StateClaimed})
		}
		prior, err := s.Claim(ctx, "sess", owner.Epoch, recs)
		if err != nil {
			t.Fatal(err)
		}
		return prior
	}
	if prior := claim("a", "b"); len(prior) != 0 {
		t.Fatalf("first claim returned %v, want nothing known", prior)
	}
	answered := orchestrator.CallRecord{ID: "a", Tool: "kb_search", Turn: 1, State: orchestrator.StateAnswered,
		Outcome: "ok", Response: map[string]any{"v": 1.0, "ok": true, "output": "found"}}
	if err := s.Answer(ctx, "sess", owner.Epoch, []orchestrator.CallRecord{answered,
		{ID: "never-claimed", State: orchestrator.StateAnswered}}); err != nil {
		t.Fatal(err)
	}
	prior := claim("a", "b", "c")
	if got := prior["a"]; got.State != orchestrator.StateAnswered || got.Response["output"] != "found" {
		t.Errorf("a: %+v, want the answered record with its response", got)
	}
	if got, ok := prior["b"]; !ok || got.State != orchestrator.StateClaimed {
		t.Errorf("b: %+v, want the claim", got)
	}
	if _, ok := prior["c"]; ok {
		t.Error("c was new but came back as known")
	}
	recs, err := s.Ledger(ctx, "sess")
	if err != nil || len(recs) != 3 {
		t.Fatalf("ledger %+v, %v; want a, b, c (an answer for an unclaimed call adds nothing)", recs, err)
	}
	for i := range ledgerMax {
		claim(fmt.Sprintf("x%d", i))
	}
	if recs, _ := s.Ledger(ctx, "sess"); len(recs) != ledgerMax || recs[0].ID != "x0" {
		t.Errorf("ledger holds %d calls from %s, want the newest %d", len(recs), recs[0].ID, ledgerMax)
	}
	if prior := claim("a"); len(prior) != 0 {
		t.Error("a trimmed call is still known")
	}
	for _, k := range []string{callsKey("sess"), callIDsKey("sess")} {
		if ttl := b.client.PTTL(ctx, k).Val(); ttl <= 0 {
			t.Errorf("%s has no TTL (%v)", k, ttl)
		}
	}
}

// A store that must have WaitReplicas replicas acknowledge a user message
// refuses to confirm it when they do not: the caller handles it like any
// store error (the session goes on from memory and writes again later).
func TestUserMessageIsNotConfirmedWithoutItsReplicas(t *testing.T) {
	b := startRedisServer(t) // a master without replicas
	s := b.store(RedisStoreOptions{Redis: Redis{RedisWaitReplicas: 1, RedisTimeout: 300 * time.Millisecond}})
	ctx := context.Background()
	rec, _, err := s.Create(ctx, Record{ID: "s-wait", UserID: "u", Mode: "text"})
	if err != nil {
		t.Fatal(err)
	}
	rec.Turn = 1
	_, err = s.BeginTurn(ctx, rec, transport.Entry{Role: transport.RoleUser, Text: "hello", Turn: 1}, TurnLimit{})
	if !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("BeginTurn without replicas: %v, want ErrNotReplicated", err)
	}
	// Without the requirement the same write is confirmed.
	if _, err := b.store(RedisStoreOptions{}).BeginTurn(ctx, rec, transport.Entry{Role: transport.RoleUser, Text: "again", Turn: 1},
		TurnLimit{}); err != nil {
		t.Fatal(err)
	}
}

// An action's idempotency key: the first success answered with it is found
// by the key (a failure is not), the ledger's call list does not show the
// key's entry, and an approval carries the confirmation's key to the
// approved run.
func testLedgerFindsAnActionsSuccessByItsKey(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.store(RedisStoreOptions{})
	owner, _ := mustCreateRecord(t, s, sampleRecord("sess"))
	rec := func(id, outcome string) orchestrator.CallRecord {
		return orchestrator.CallRecord{ID: id, Tool: "refund", Turn: 1, State: orchestrator.StateAnswered, Outcome: outcome,
			IdempotencyKey: "k-1", Response: map[string]any{"v": 1.0, "ok": outcome == "ok", "output": id}}
	}
	for _, r := range []orchestrator.CallRecord{rec("failed", "transient"), rec("first", "ok"), rec("second", "ok")} {
		if _, err := s.Claim(ctx, "sess", owner.Epoch, []orchestrator.CallRecord{{ID: r.ID, State: orchestrator.StateClaimed}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Answer(ctx, "sess", owner.Epoch, []orchestrator.CallRecord{r}); err != nil {
			t.Fatal(err)
		}
	}
	got, ok, err := s.Succeeded(ctx, "sess", "k-1")
	if err != nil || !ok || got.ID != "first" || got.Response["output"] != "first" {
		t.Fatalf("Succeeded(k-1) = %+v, %v, %v; want the first success", got, ok, err)
	}
	if _, ok, err := s.Succeeded(ctx, "sess", "k-2"); err != nil || ok {
		t.Fatalf("Succeeded(k-2) = %v, %v; want none", ok, err)
	}
	if recs, err := s.Ledger(ctx, "sess"); err != nil || len(recs) != 3 {
		t.Fatalf("ledger %+v, %v; want the three calls only", recs, err)
	}

	conf := transferConf(owner, "c_1")
	conf.IdempotencyKey = "k-9"
	if ok, _, err := s.ConsumeOrRequest(ctx, conf); err != nil || ok {
		t.Fatalf("request: %v, %v", ok, err)
	}
	if _, err := s.Resolve(ctx, "sess", owner.Epoch, owner.UserID, "c_1", true, time.Minute); err != nil {
		t.Fatal(err)
	}
	again := transferConf(owner, "c_2")
	ok, key, err := s.ConsumeOrRequest(ctx, again)
	if err != nil || !ok || key != "k-9" {
		t.Fatalf("consume = %v, %q, %v; want approved with key k-9", ok, key, err)
	}
}
