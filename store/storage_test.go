package store

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/transport"
)

// testUserStorageQuota: the bytes of history all of a user's sessions keep
// are counted across sessions; a new turn the quota has no room for is
// refused (nothing counted), the model's answers and the gateway's own
// turns are stored anyway, another user is unaffected, a session is
// forgotten once its keys expire, and a resume counts the session afresh.
// `<` is stored as one byte, not as a six-byte escape.
func testUserStorageQuota(t *testing.T, b *backend) {
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	const ttl, quota = time.Hour, 10 << 10
	s := b.store(RedisStoreOptions{Now: clock, Redis: Redis{SessionTTL: ttl, UserStorageBytes: quota}, HistoryMaxBytes: 16 << 10})

	text := strings.Repeat("<b>", 1000) // 3,000 bytes stored; 13,000 if escaped
	entrySize := len(`{"role":"user","text":"","turn":1}`) + len(text)
	begin := func(r *Record, lim TurnLimit) TurnStart {
		t.Helper()
		r.Turn++
		ts, err := s.BeginTurn(ctx, *r, transport.Entry{Role: transport.RoleUser, Text: text, Turn: r.Turn}, lim)
		if err != nil {
			t.Fatalf("begin turn %d of %s: %v", r.Turn, r.ID, err)
		}
		return ts
	}
	alice := TurnLimit{Key: "alice"}
	a1, tok1 := mustCreateRecord(t, s, sampleRecord("s-quota-1"))
	a2, _ := mustCreateRecord(t, s, sampleRecord("s-quota-2"))
	for i, r := range []*Record{&a1, &a2, &a1} {
		if ts := begin(r, alice); ts.OverQuota || ts.StoredBytes != int64((i+1)*entrySize) {
			t.Fatalf("turn %d of alice within her quota: %+v, want counted (%d bytes)", i+1, ts, (i+1)*entrySize)
		}
	}
	raw := b.client.LIndex(ctx, historyKey(a1.ID), 0).Val()
	if len(raw) != entrySize || !strings.Contains(raw, text) {
		t.Fatalf("stored entry is %d bytes (%.40q…), want %d with `<` as one byte", len(raw), raw, entrySize)
	}

	// The fourth does not fit in 10 KiB: refused, and not counted.
	ts := begin(&a2, alice)
	if !ts.OverQuota || ts.StoredBytes != int64(3*entrySize) {
		t.Fatalf("turn over alice's quota: %+v, want refused at %d bytes", ts, 3*entrySize)
	}
	a2.Turn--
	if err := s.Undo(ctx, a2, a2.Turn+1); err != nil {
		t.Fatal(err)
	}
	if n, err := s.UserStorage(ctx, "alice"); err != nil || n != int64(3*entrySize) {
		t.Fatalf("alice's storage after the refusal: %d, %v; want %d", n, err, 3*entrySize)
	}
	// The gateway's own turn (a confirmation's outcome) and the model's
	// answers are stored and counted, never refused.
	if ts := begin(&a2, TurnLimit{Key: "alice", QuotaExempt: true}); ts.OverQuota {
		t.Fatalf("the gateway's own turn was refused for the quota: %+v", ts)
	}
	if err := s.Append(ctx, a2, transport.Entry{Role: transport.RoleModel, Text: "ok", Turn: a2.Turn}); err != nil {
		t.Fatal(err)
	}
	over, _ := s.UserStorage(ctx, "alice")
	if over <= quota {
		t.Fatalf("alice's storage after an answer = %d, want it counted past the quota", over)
	}

	// Bob has a quota of his own.
	bobRec := sampleRecord("s-quota-bob")
	bobRec.UserID = "bob"
	bob, _ := mustCreateRecord(t, s, bobRec)
	if ts := begin(&bob, TurnLimit{Key: "bob"}); ts.OverQuota || ts.StoredBytes != int64(entrySize) {
		t.Fatalf("bob's first turn while alice is over her quota: %+v", ts)
	}

	// A resume counts the session afresh from its record: what was counted
	// for it is lost here (as in a Redis that lost the user's keys).
	if err := b.client.Del(ctx, storageKey("alice"), storageExpiryKey("alice")).Err(); err != nil {
		t.Fatal(err)
	}
	mustResume(t, s, a1.ID, tok1, "alice")
	if n, _ := s.UserStorage(ctx, "alice"); n != int64(2*entrySize) {
		t.Fatalf("alice's storage after resuming a session of two entries: %d, want %d", n, 2*entrySize)
	}

	// Once her sessions' keys have expired, they are forgotten: a new
	// session of hers has the whole quota.
	advance(ttl + time.Second)
	a3, _ := mustCreateRecord(t, s, sampleRecord("s-quota-3"))
	if ts := begin(&a3, alice); ts.OverQuota || ts.StoredBytes != int64(entrySize) {
		t.Fatalf("alice's turn after her sessions expired: %+v, want counted alone (%d bytes)", ts, entrySize)
	}
}

// TestMarshalJSONWritesMarkupAsIs: the store's JSON keeps < > & as they
// are and has no trailing newline.
func TestMarshalJSONWritesMarkupAsIs(t *testing.T) {
	b, err := MarshalJSON(transport.Entry{Role: transport.RoleUser, Text: "<a href='x'>&</a>"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"role":"user","text":"<a href='x'>&</a>"}`; got != want {
		t.Fatalf("MarshalJSON = %s, want %s", got, want)
	}
}
