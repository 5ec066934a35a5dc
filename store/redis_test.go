package store

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/transport"
)

// backend is one Redis the suite runs against.
type backend struct {
	client redis.UniversalClient
	mr     *Embedded // nil for a real redis-server
}

func newBackend(t *testing.T, addr string, mr *Embedded) *backend {
	t.Helper()
	// Bounds far above a healthy call's: the suite runs on a shared, busy
	// machine, where a starved process is not a slow Redis.
	c, err := NewRedisClient("redis://"+addr, fixtureTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &backend{client: c, mr: mr}
}

func startMiniredis(t *testing.T) *backend {
	mr, err := StartEmbedded(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mr.Close)
	return newBackend(t, mr.Addr(), mr)
}

func startRedisServer(t *testing.T) *backend {
	return newBackend(t, redistest.Start(t), nil)
}

// fixtureTimeout bounds the suite's calls unless a test sets its own.
const fixtureTimeout = 5 * time.Second

func (b *backend) store(o RedisStoreOptions) *RedisStore {
	if o.RedisTimeout == 0 {
		o.RedisTimeout = fixtureTimeout
	}
	return NewRedisStore(b.client, o)
}

// allContents returns every key and every field, member and value stored.
func (b *backend) allContents(t *testing.T) (keys, values []string) {
	t.Helper()
	ctx := context.Background()
	for _, k := range b.keys(t) {
		keys = append(keys, k)
		switch typ := b.client.Type(ctx, k).Val(); typ {
		case "hash":
			for f, v := range b.client.HGetAll(ctx, k).Val() {
				values = append(values, f, v)
			}
		case "list":
			values = append(values, b.client.LRange(ctx, k, 0, -1).Val()...)
		case "string":
			values = append(values, b.client.Get(ctx, k).Val())
		default:
			t.Fatalf("key %s has unexpected type %q", k, typ)
		}
	}
	return keys, values
}

var suite = []struct {
	name string
	run  func(t *testing.T, b *backend)
}{
	{"CreateThenResumeReturnsRecordAndHistoryInOrder", testRoundTrip},
	{"ResumeRefusesWrongTokenOtherUserUnknownID", testResumeRefusals},
	{"TokenIsNotStoredInPlaintext", testTokenNotStored},
	{"EveryKeyHasTTLRefreshedByWrites", testTTLRefresh},
	{"ExpiredSessionIsRefused", testExpiry},
	{"HistoryIsTrimmedToHistoryMax", testHistoryTrim},
	{"RestoreRewritesEverythingAfterRedisLostIt", testRestore},
	{"CreateRefusesExistingID", testCreateCollision},
	{"ObserveSeesEveryOp", testObserve},
	{"ObserveLeavesOutCallsTheirCallerAbandoned", testObserveAbandoned},
	{"LedgerClaimAnswerAndTrim", testLedgerClaimAnswerAndTrim},
	{"LedgerFindsAnActionsSuccessByItsKey", testLedgerFindsAnActionsSuccessByItsKey},
	{"ResumeTakesOwnershipAndFencesTheOldOwner", testFencing},
	{"LedgerClaimIsFencedOnTheEpoch", testFencedClaim},
	{"LedgerAnswerIsFencedOnTheEpoch", testFencedAnswer},
	{"ConfirmationRequestIsFencedOnTheEpoch", testFencedConsumeOrRequest},
	{"ConfirmationAnswerIsFencedOnTheEpoch", testFencedResolve},
	{"BeginTurnCountsTurnsPerUserAndUndoTakesTheEntryBack", testBeginTurn},
	{"WatchAnnouncesOwnersAndNoticesLostData", testWatch},
	{"TimelineKeepsTheNewestAndTheStreamGetsEachTurn", testTimeline},
	{"OperatorCloseRefusesResume", testOperatorClose},
	{"HandoffLastsUntilAnOperatorHandsBack", testHandoff},
	{"UserStorageQuotaCountsEverySessionOfTheUser", testUserStorageQuota},
	{"MarkerGoneTellsALossBeforeWatchNotices", testMarkerGone},
	{"MarkerGoneUntilTheWatcherHeardLost", testMarkerGoneUntilLostReturns},
}

func TestRedisStore(t *testing.T) {
	backends := []struct {
		name  string
		start func(t *testing.T) *backend
	}{
		{"miniredis", startMiniredis},
		{"redis-server", startRedisServer},
		{"redis-cluster", startRedisCluster}, // cluster_test.go
	}
	for _, bk := range backends {
		t.Run(bk.name, func(t *testing.T) {
			b := bk.start(t)
			for _, c := range suite {
				t.Run(c.name, func(t *testing.T) {
					b.flush(t)
					c.run(t, b)
				})
			}
		})
	}
}

func sampleRecord(id string) Record {
	return Record{
		ID:              id,
		UserID:          "alice",
		Mode:            "text",
		Turn:            0,
		RegistryVersion: "reg-v3",
		CreatedAt:       time.Date(2025, 3, 1, 10, 30, 0, 123456789, time.FixedZone("CET", 3600)),
	}
}

func sampleEntries() []transport.Entry {
	return []transport.Entry{
		{Role: transport.RoleUser, Text: "what is the weather in Lyon?"},
		{Role: transport.RoleModel, Calls: []transport.FunctionCall{
			{ID: "c1", Name: "weather", Args: map[string]any{"city": "Lyon", "days": float64(2)}},
		}},
		{Role: transport.RoleTool, Results: []transport.FunctionResult{
			{ID: "c1", Name: "weather", Response: map[string]any{"output": "sunny"}},
		}},
		{Role: transport.RoleModel, Text: "Sunny in Lyon."},
	}
}

func textEntries(texts ...string) []transport.Entry {
	out := make([]transport.Entry, len(texts))
	for i, s := range texts {
		out[i] = transport.Entry{Role: transport.RoleUser, Text: s}
	}
	return out
}

func mustCreate(t *testing.T, s *RedisStore, rec Record) string {
	t.Helper()
	_, tok := mustCreateRecord(t, s, rec)
	return tok
}

// mustCreateRecord creates rec and returns it as stored (first epoch and
// token digest) with the resume token.
func mustCreateRecord(t *testing.T, s *RedisStore, rec Record) (Record, string) {
	t.Helper()
	got, tok, err := s.Create(context.Background(), rec)
	if err != nil {
		t.Fatalf("create %s: %v", rec.ID, err)
	}
	if got.Epoch != 1 || got.TokenHash != HashToken(tok) {
		t.Fatalf("created record has epoch %d and digest %q", got.Epoch, got.TokenHash)
	}
	return got, tok
}

// restorable is rec as its owner holds it after a create: first epoch and
// some token digest.
func restorable(rec Record) Record {
	rec.Epoch, rec.TokenHash = 1, HashToken("tok")
	return rec
}

func mustResume(t *testing.T, s *RedisStore, id, tok, user string) (Record, []transport.Entry) {
	t.Helper()
	rec, hist, err := s.Resume(context.Background(), id, tok, user)
	if err != nil {
		t.Fatalf("resume %s: %v", id, err)
	}
	return rec, hist
}

// assertRecord compares the fields a session writes (not the epoch and
// digest, which the store owns).
func assertRecord(t *testing.T, got, want Record) {
	t.Helper()
	if !got.CreatedAt.Equal(want.CreatedAt) {
		t.Errorf("CreatedAt = %v, want %v", got.CreatedAt, want.CreatedAt)
	}
	got.CreatedAt, want.CreatedAt = time.Time{}, time.Time{}
	got.Epoch, want.Epoch, got.TokenHash, want.TokenHash = 0, 0, "", ""
	if got != want {
		t.Errorf("record = %+v, want %+v", got, want)
	}
}

func testRoundTrip(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.store(RedisStoreOptions{})
	rec := sampleRecord("s-roundtrip")
	tok := mustCreate(t, s, rec)
	if raw, err := base64.RawURLEncoding.DecodeString(tok); err != nil || len(raw) != 32 {
		t.Fatalf("token %q is not 32 bytes of raw URL base64 (err %v)", tok, err)
	}

	rec0, hist0 := mustResume(t, s, rec.ID, tok, rec.UserID)
	assertRecord(t, rec0, rec)
	if len(hist0) != 0 {
		t.Fatalf("new session has history %v", hist0)
	}
	if rec0.Epoch != 2 || rec0.TokenHash != HashToken(tok) {
		t.Fatalf("resumed record: epoch %d, digest %q; want epoch 2 and the token's digest", rec0.Epoch, rec0.TokenHash)
	}
	rec.Epoch = rec0.Epoch

	entries := sampleEntries()
	rec.Turn = 1
	if err := s.Append(ctx, rec, entries[:2]...); err != nil {
		t.Fatal(err)
	}
	rec.Turn, rec.Mode = 2, "voice"
	if err := s.Append(ctx, rec, entries[2:]...); err != nil {
		t.Fatal(err)
	}

	got, hist := mustResume(t, s, rec.ID, tok, rec.UserID)
	assertRecord(t, got, rec)
	if !reflect.DeepEqual(hist, entries) {
		t.Fatalf("history =\n%+v\nwant\n%+v", hist, entries)
	}
}

func testResumeRefusals(t *testing.T, b *backend) {
	s := b.store(RedisStoreOptions{})
	rec := sampleRecord("s-refusals")
	tok := mustCreate(t, s, rec)
	other := sampleRecord("s-other")
	otherTok := mustCreate(t, s, other)

	cases := []struct {
		name, id, token, user string
	}{
		{"wrong token", rec.ID, "AAAA" + tok[4:], rec.UserID},
		{"empty token", rec.ID, "", rec.UserID},
		{"token of another session", rec.ID, otherTok, rec.UserID},
		{"other user", rec.ID, tok, "mallory"},
		{"empty user", rec.ID, tok, ""},
		{"unknown id", "s-nobody", tok, rec.UserID},
		{"id breaking the hash tag", "s-refusals}x", tok, rec.UserID},
	}
	var msgs []string
	for _, c := range cases {
		got, hist, err := s.Resume(context.Background(), c.id, c.token, c.user)
		if !errors.Is(err, ErrResumeRefused) {
			t.Errorf("%s: err = %v, want ErrResumeRefused", c.name, err)
			continue
		}
		if got != (Record{}) || hist != nil {
			t.Errorf("%s: refused resume leaked %+v %v", c.name, got, hist)
		}
		if strings.Contains(err.Error(), tok) || (c.token != "" && strings.Contains(err.Error(), c.token)) {
			t.Errorf("%s: error %q contains a token", c.name, err)
		}
		if c.id == rec.ID {
			msgs = append(msgs, err.Error())
		}
	}
	// The client must not learn which check failed.
	for _, m := range msgs {
		if m != msgs[0] {
			t.Errorf("refusals differ: %q vs %q", m, msgs[0])
		}
	}
	// The refusals did not break the session.
	mustResume(t, s, rec.ID, tok, rec.UserID)
}

func testTokenNotStored(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.store(RedisStoreOptions{})
	rec, tok := mustCreateRecord(t, s, sampleRecord("s-secret"))
	if err := s.Append(ctx, rec, sampleEntries()...); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restore(ctx, rec, sampleEntries(), nil); err != nil {
		t.Fatal(err)
	}
	mustResume(t, s, rec.ID, tok, rec.UserID)

	keys, values := b.allContents(t)
	if len(keys) == 0 {
		t.Fatal("nothing stored")
	}
	sum := sha256.Sum256([]byte(tok))
	digest := hex.EncodeToString(sum[:])
	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	sawDigest := false
	for _, v := range slices.Concat(keys, values) {
		if strings.Contains(v, tok) || strings.Contains(v, string(raw)) || strings.Contains(v, hex.EncodeToString(raw)) {
			t.Errorf("the resume token is readable in Redis: %q", v)
		}
		sawDigest = sawDigest || v == digest
	}
	if !sawDigest {
		t.Errorf("the token's SHA-256 digest is not stored; contents: %q", values)
	}
}

func testTTLRefresh(t *testing.T, b *backend) {
	ctx := context.Background()
	const ttl = time.Hour
	s := b.store(RedisStoreOptions{Redis: Redis{SessionTTL: ttl}})
	rec, tok := mustCreateRecord(t, s, sampleRecord("s-ttl"))
	if err := s.Append(ctx, rec, sampleEntries()...); err != nil {
		t.Fatal(err)
	}

	checkTTLs := func(when string, min time.Duration) {
		t.Helper()
		keys, _ := b.allContents(t)
		if len(keys) != 2 {
			t.Fatalf("%s: keys = %v, want meta and history", when, keys)
		}
		for _, k := range keys {
			if !strings.HasPrefix(k, "turnstile:{"+rec.ID+"}:") {
				t.Errorf("key %q does not carry the session's hash tag", k)
			}
			d := b.client.PTTL(ctx, k).Val()
			if d < min || d > ttl {
				t.Errorf("%s: TTL of %s = %v, want in [%v, %v]", when, k, d, min, ttl)
			}
		}
	}
	checkTTLs("after create and append", ttl-time.Minute)

	refreshers := []struct {
		op string
		do func() error
	}{
		{"append", func() error { return s.Append(ctx, rec, textEntries("again")...) }},
		{"restore", func() error { _, err := s.Restore(ctx, rec, sampleEntries(), nil); return err }},
		{"resume", func() error { _, _, err := s.Resume(ctx, rec.ID, tok, rec.UserID); return err }},
	}
	for _, r := range refreshers {
		for _, k := range []string{metaKey(rec.ID), historyKey(rec.ID)} {
			if err := b.client.PExpire(ctx, k, 5*time.Second).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.do(); err != nil {
			t.Fatalf("%s: %v", r.op, err)
		}
		checkTTLs("after "+r.op, ttl-time.Minute)
	}
}

func testExpiry(t *testing.T, b *backend) {
	const ttl = time.Second
	s := b.store(RedisStoreOptions{Redis: Redis{SessionTTL: ttl}})
	rec, tok := mustCreateRecord(t, s, sampleRecord("s-expiry"))
	if err := s.Append(context.Background(), rec, sampleEntries()...); err != nil {
		t.Fatal(err)
	}
	mustResume(t, s, rec.ID, tok, rec.UserID)

	// Every backend, the embedded store too, expires keys on its own
	// clock: poll, without Resume, which would refresh the TTL.
	testwait.For(t, "the session keys to expire after their TTL", func() bool {
		return b.client.Exists(context.Background(), metaKey(rec.ID), historyKey(rec.ID)).Val() == 0
	})
	if _, _, err := s.Resume(context.Background(), rec.ID, tok, rec.UserID); !errors.Is(err, ErrResumeRefused) {
		t.Fatalf("resume after expiry: err = %v, want ErrResumeRefused", err)
	}
	if keys, _ := b.allContents(t); len(keys) != 0 {
		t.Errorf("keys left after expiry: %v", keys)
	}
}

func testHistoryTrim(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.store(RedisStoreOptions{HistoryMax: 5})
	rec, tok := mustCreateRecord(t, s, sampleRecord("s-trim"))
	if err := s.Append(ctx, rec, textEntries("1", "2", "3")...); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, rec, textEntries("4", "5", "6", "7")...); err != nil {
		t.Fatal(err)
	}
	_, hist := mustResume(t, s, rec.ID, tok, rec.UserID)
	if want := textEntries("3", "4", "5", "6", "7"); !reflect.DeepEqual(hist, want) {
		t.Fatalf("after append: history = %v, want %v", hist, want)
	}

	rec.Epoch = 2 // the resume above took the session
	if _, err := s.Restore(ctx, rec, textEntries("a", "b", "c", "d", "e", "f", "g"), nil); err != nil {
		t.Fatal(err)
	}
	_, hist = mustResume(t, s, rec.ID, tok, rec.UserID)
	if want := textEntries("c", "d", "e", "f", "g"); !reflect.DeepEqual(hist, want) {
		t.Fatalf("after restore: history = %v, want %v", hist, want)
	}

	// The byte bound: the newest entries that fit, at least one.
	rec.Epoch = 3
	big := strings.Repeat("x", 400)
	s = b.store(RedisStoreOptions{HistoryMax: 100, HistoryMaxBytes: 1000})
	if err := s.Append(ctx, rec, textEntries(big+"1", big+"2", big+"3")...); err != nil {
		t.Fatal(err)
	}
	_, hist = mustResume(t, s, rec.ID, tok, rec.UserID)
	if want := textEntries(big+"2", big+"3"); !reflect.DeepEqual(hist, want) {
		t.Fatalf("byte bound after append: %d entries, want the newest 2", len(hist))
	}
	rec.Epoch = 4
	if err := s.Append(ctx, rec, textEntries(strings.Repeat("y", 2000))...); err != nil {
		t.Fatal(err)
	}
	_, hist = mustResume(t, s, rec.ID, tok, rec.UserID)
	if len(hist) != 1 || len(hist[0].Text) != 2000 {
		t.Fatalf("an entry larger than the bound: history of %d entries, want it alone", len(hist))
	}
}

func testRestore(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.store(RedisStoreOptions{})
	rec, tok := mustCreateRecord(t, s, sampleRecord("s-restore"))
	if err := s.Append(ctx, rec, sampleEntries()...); err != nil {
		t.Fatal(err)
	}
	conf := orchestrator.Confirmation{Token: "conf1", SessionID: rec.ID, UserID: rec.UserID, Tool: "refund",
		Turn: 3, ExpiresAt: time.Now().Add(time.Minute).Truncate(time.Millisecond)}
	expired := conf
	expired.Token, expired.ExpiresAt = "conf0", time.Now().Add(-time.Second)

	// Redis loses everything; the owner writes back what it holds.
	if err := b.client.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, rec, textEntries("lost?")...); !errors.Is(err, ErrSessionGone) {
		t.Fatalf("append to a lost session: %v, want ErrSessionGone", err)
	}
	rec.Turn, rec.Mode, rec.PendingMessage = 7, "voice", "say sorry"
	want := textEntries("kept in memory while Redis was away", "and this")
	restored, err := s.Restore(ctx, rec, want, []orchestrator.Confirmation{conf, expired})
	if err != nil || !restored {
		t.Fatalf("restore = %v, %v; want a restoration", restored, err)
	}
	got, hist := mustResume(t, s, rec.ID, tok, rec.UserID)
	assertRecord(t, got, rec)
	if !reflect.DeepEqual(hist, want) {
		t.Fatalf("history = %v, want %v", hist, want)
	}
	pending, err := s.Pending(ctx, rec.ID)
	if err != nil || len(pending) != 1 || pending[0].Token != "conf1" || !pending[0].ExpiresAt.Equal(conf.ExpiresAt) {
		t.Fatalf("pending confirmations after restore = %+v, %v; want conf1 alone", pending, err)
	}

	// A rewrite of a present record is not a restoration; the new owner's
	// epoch refuses the old one's.
	rec.Epoch = got.Epoch
	if restored, err := s.Restore(ctx, rec, nil, nil); err != nil || restored {
		t.Fatalf("rewrite = %v, %v; want a plain rewrite", restored, err)
	}
	if _, hist := mustResume(t, s, rec.ID, tok, rec.UserID); len(hist) != 0 {
		t.Fatalf("restore with empty history left %v", hist)
	}
	if _, err := s.Restore(ctx, rec, want, nil); !errors.Is(err, ErrFenced) {
		t.Fatalf("restore by an older owner: %v, want ErrFenced", err)
	}
	if _, err := s.Restore(ctx, sampleRecord("s-nodigest"), want, nil); err == nil {
		t.Fatal("restore of a record without digest or epoch succeeded")
	}
}

func testCreateCollision(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.store(RedisStoreOptions{})
	rec, tok := mustCreateRecord(t, s, sampleRecord("s-taken"))
	if err := s.Append(ctx, rec, sampleEntries()...); err != nil {
		t.Fatal(err)
	}

	intruder := sampleRecord(rec.ID)
	intruder.UserID = "mallory"
	_, tok2, err := s.Create(ctx, intruder)
	if err == nil || tok2 != "" {
		t.Fatalf("second create of %s = %q, %v; want an error", rec.ID, tok2, err)
	}
	if !strings.Contains(err.Error(), rec.ID) {
		t.Errorf("error %q does not name the session", err)
	}
	got, hist := mustResume(t, s, rec.ID, tok, rec.UserID)
	assertRecord(t, got, rec)
	if !reflect.DeepEqual(hist, sampleEntries()) {
		t.Errorf("history changed by the refused create: %v", hist)
	}
}

// A call whose caller went away (a connection closed while its write was
// on the way) is no Redis error; a call that ran out of time is.
func testObserveAbandoned(t *testing.T, b *backend) {
	var (
		mu     sync.Mutex
		failed []string
	)
	observe := func(op metrics.RedisOp, _ time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed = append(failed, string(op)+": "+err.Error())
		}
	}
	s := b.store(RedisStoreOptions{Observe: observe})
	rec, tok := mustCreateRecord(t, s, sampleRecord("s-abandoned"))
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := s.Resume(gone, rec.ID, tok, rec.UserID); !errors.Is(err, context.Canceled) {
		t.Fatalf("resume with its caller gone: %v, want context.Canceled", err)
	}
	if err := s.Append(gone, rec, sampleEntries()...); !errors.Is(err, context.Canceled) {
		t.Fatalf("append with its caller gone: %v, want context.Canceled", err)
	}
	mu.Lock()
	if len(failed) != 0 {
		t.Errorf("abandoned calls counted as Redis errors: %q", failed)
	}
	mu.Unlock()

	slow := b.store(RedisStoreOptions{Observe: observe, Redis: Redis{RedisTimeout: time.Nanosecond}})
	if err := slow.Ping(context.Background()); err == nil {
		t.Fatal("a ping with a 1 ns deadline succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failed) != 1 || !strings.HasPrefix(failed[0], "ping: ") {
		t.Errorf("a call out of time observed as %q, want one ping failure", failed)
	}
}

func testObserve(t *testing.T, b *backend) {
	ctx := context.Background()
	type obs struct {
		op  string
		d   time.Duration
		err error
	}
	var (
		mu   sync.Mutex
		seen []obs
	)
	s := b.store(RedisStoreOptions{Observe: func(op metrics.RedisOp, d time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, obs{string(op), d, err})
	}})
	rec, tok := mustCreateRecord(t, s, sampleRecord("s-observe"))
	rec, _ = mustResume(t, s, rec.ID, tok, rec.UserID)
	if err := s.Append(ctx, rec, sampleEntries()...); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restore(ctx, rec, sampleEntries(), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	_, _, refused := s.Resume(ctx, rec.ID, tok, "mallory")
	rec.Epoch--
	fenced := s.Append(ctx, rec, sampleEntries()...)

	mu.Lock()
	defer mu.Unlock()
	var ops []string
	for _, o := range seen {
		ops = append(ops, o.op)
		if o.d <= 0 || o.d > 3*time.Second {
			t.Errorf("%s: implausible duration %v", o.op, o.d)
		}
	}
	if want := []string{"create", "resume", "append", "restore", "ping", "resume", "append"}; !slices.Equal(ops, want) {
		t.Fatalf("observed ops %v, want %v", ops, want)
	}
	// A refused resume and a fenced write are outcomes, not store failures:
	// they must not count as Redis errors.
	for _, o := range seen {
		if o.err != nil {
			t.Errorf("%s observed error %v", o.op, o.err)
		}
	}
	if !errors.Is(refused, ErrResumeRefused) || !errors.Is(fenced, ErrFenced) {
		t.Errorf("refused resume returned %v, fenced append %v", refused, fenced)
	}
}
