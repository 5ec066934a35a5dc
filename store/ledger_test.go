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
	s := b.store(RedisStoreOptions{WaitReplicas: 1, Timeout: 300 * time.Millisecond})
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
