package store

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"
)

// testTimeline: a turn's end writes its timeline entry and the events
// waiting, keeps the newest TimelineMax, puts each turn (not events) on
// the event stream, and writes nothing for an owner that lost the session.
func testTimeline(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.store(RedisStoreOptions{Redis: Redis{TimelineMax: 3, EventsStream: "turnstile:test:events", EventsMaxLen: 1000}})
	rec, token, err := s.Create(ctx, sampleRecord("s_timeline"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 4; i++ {
		rec.Turn = i
		end := TurnEnd{Entries: textEntries("turn " + strconv.Itoa(i)), Turn: []byte(`{"kind":"turn","turn":` + strconv.Itoa(i) + `}`)}
		if i == 4 {
			end.Events = [][]byte{[]byte(`{"kind":"event","event":"mode"}`)}
		}
		if _, err := s.EndTurn(ctx, rec, end); err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
	}
	tl, err := s.Timeline(ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`{"kind":"turn","turn":3}`, `{"kind":"event","event":"mode"}`, `{"kind":"turn","turn":4}`}
	if len(tl.Entries) != 3 || tl.Entries[0] != want[0] || tl.Entries[1] != want[1] || tl.Entries[2] != want[2] || !tl.Full {
		t.Fatalf("timeline = %q (full %v), want the newest three %q", tl.Entries, tl.Full, want)
	}
	if tl.Turn != 4 || tl.UserID != "alice" || tl.Node != "" {
		t.Fatalf("timeline head: %+v", tl.Record)
	}
	msgs, err := b.client.XRange(ctx, "turnstile:test:events", "-", "+").Result()
	if err != nil || len(msgs) != 4 || msgs[3].Values["record"] != `{"kind":"turn","turn":4}` || msgs[0].Values["session"] != rec.ID {
		t.Fatalf("stream: %v (%v), want the four turns", msgs, err)
	}

	// An older owner writes nothing.
	if _, _, err := s.Resume(ctx, rec.ID, token, rec.UserID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EndTurn(ctx, rec, TurnEnd{Turn: []byte(`{"kind":"turn","turn":5}`)}); !errors.Is(err, ErrFenced) {
		t.Fatalf("a fenced turn end: %v, want ErrFenced", err)
	}
	if tl, _ := s.Timeline(ctx, rec.ID); tl.Entries[2] != want[2] {
		t.Fatalf("a fenced owner wrote the timeline: %q", tl.Entries)
	}

	// The live index: held while renewed, not once left.
	if err := s.MarkLive(ctx, "node-a", []string{rec.ID}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if tl, _ := s.Timeline(ctx, rec.ID); tl.Node != "node-a" {
		t.Fatalf("held by %q, want node-a", tl.Node)
	}
	if live, err := s.LiveSessions(ctx, 10); err != nil || len(live) != 1 || live[0].Node != "node-a" || live[0].ID != rec.ID {
		t.Fatalf("live sessions: %+v (%v)", live, err)
	}
	if err := s.Leave(ctx, rec, "node-a", nil); err != nil {
		t.Fatal(err)
	}
	if tl, _ := s.Timeline(ctx, rec.ID); tl.Node != "" {
		t.Fatalf("held by %q after the connection left", tl.Node)
	}
	if live, _ := s.LiveSessions(ctx, 10); len(live) != 0 {
		t.Fatalf("live sessions after the connection left: %+v", live)
	}
}

// testOperatorClose: a closed session cannot be resumed, and its close is
// on its timeline.
func testOperatorClose(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.store(RedisStoreOptions{})
	rec, token, err := s.Create(ctx, sampleRecord("s_closed"))
	if err != nil {
		t.Fatal(err)
	}
	found, err := s.CloseSession(ctx, rec.ID, "dana: abuse", []byte(`{"kind":"event","event":"operator"}`))
	if err != nil || !found {
		t.Fatalf("close: %v %v", found, err)
	}
	if _, _, err := s.Resume(ctx, rec.ID, token, rec.UserID); !errors.Is(err, ErrResumeRefused) {
		t.Fatalf("resume of a closed session: %v, want ErrResumeRefused", err)
	}
	tl, err := s.Timeline(ctx, rec.ID)
	if err != nil || tl.Closed != "dana: abuse" || len(tl.Entries) != 1 {
		t.Fatalf("closed session's timeline: %+v (%v)", tl, err)
	}
	if found, err := s.CloseSession(ctx, "s_unknown", "dana", []byte(`{}`)); err != nil || found {
		t.Fatalf("close of an unknown session: %v %v", found, err)
	}
}
