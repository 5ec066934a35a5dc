package session

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/transport"
)

// A restore queued while writes were failing (the fence check asks for it
// when Redis comes back) may run after a turn's entry is in the history
// but before the turn's own write: the restore writes the entry with the
// rest, and the write after it must not append it again. Seen under load
// as a resumed history with the first turn after an outage twice.
func TestAWriteAfterARestoreThatCoveredItsEntriesDoesNotStoreThemTwice(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb, err := store.NewRedisClient("redis://"+mr.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	rs := store.NewRedisStore(rdb, store.RedisStoreOptions{})
	ctx := context.Background()
	rec, token, err := rs.Create(ctx, store.Record{ID: "s1", UserID: "ada", Mode: protocol.ModeText})
	if err != nil {
		t.Fatal(err)
	}
	st := &state{historyMax: 100, now: time.Now}
	st.load(rec, nil)
	p := &persister{st: st, store: rs, timeout: time.Second, ctx: ctx,
		log: fixedLog{slog.New(slog.NewTextHandler(io.Discard, nil))}, fenced: func() {}, restored: func(context.Context) {}}

	entry := func(role transport.Role, text string, turn int) transport.Entry {
		return transport.Entry{Role: role, Text: text, Turn: turn}
	}
	one := []transport.Entry{entry(transport.RoleUser, "one", 1), entry(transport.RoleModel, "noted", 1)}
	p.appendEntries(st.append(one), one...)

	p.markDirty() // a write failed while Redis was away: the next one rewrites everything
	two := entry(transport.RoleUser, "two", 2)
	mark := st.append([]transport.Entry{two}) // the next turn's entry is in the history
	p.restoreSoon()                           // the restore asked for before it runs now, and writes it
	p.appendEntries(mark, two)                // the turn's own write comes after
	answer := []transport.Entry{entry(transport.RoleModel, "noted", 2)}
	p.appendEntries(st.append(answer), answer...) // a later write is not held back
	p.finish()

	_, hist, err := rs.Resume(ctx, rec.ID, token, "ada")
	if err != nil {
		t.Fatal(err)
	}
	var said []string
	for _, e := range hist {
		said = append(said, e.Text)
	}
	if got := strings.Join(said, "|"); got != "one|noted|two|noted" {
		t.Fatalf("stored history = %q, want one|noted|two|noted", got)
	}
}

// fixedLog is a logSource that is one logger.
type fixedLog struct{ l *slog.Logger }

func (f fixedLog) log() *slog.Logger { return f.l }
