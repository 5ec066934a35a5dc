package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/metrics"
)

// testHandoff: a hand-off stays in the record through turns and resumes,
// goes on the timeline and the event stream, and an operator's hand-back
// clears it and is announced to the node holding the session.
func testHandoff(t *testing.T, b *backend) {
	ctx := context.Background()
	stream := "turnstile:test:handoffs:" + time.Now().Format("150405.000000000")
	var failures []error // what Observe reports as failed: none here
	s := b.store(RedisStoreOptions{Redis: Redis{EventsStream: stream, EventsMaxLen: 1000},
		Observe: func(_ metrics.RedisOp, _ time.Duration, err error) {
			if err != nil {
				failures = append(failures, err)
			}
		}})
	rec, token, err := s.Create(ctx, sampleRecord("s_handoff"))
	if err != nil {
		t.Fatal(err)
	}
	h := Handoff{Reason: "refund above the limit", Summary: "Wants 300 EUR back.", At: time.Now().UTC().Truncate(time.Second)}
	if err := s.HandOff(ctx, rec, h, []byte(`{"kind":"event","event":"handoff"}`), []byte(`{"event":"handoff"}`)); err != nil {
		t.Fatal(err)
	}
	// A turn's write (the user typing to the person) keeps it.
	rec.Turn = 1
	if err := s.Append(ctx, rec, textEntries("are you there?")...); err != nil {
		t.Fatal(err)
	}
	resumed, _, err := s.Resume(ctx, rec.ID, token, rec.UserID)
	if err != nil {
		t.Fatal(err)
	}
	if !resumed.Handoff.Active() || resumed.Handoff.Reason != h.Reason || resumed.Handoff.Summary != h.Summary ||
		!resumed.Handoff.At.Equal(h.At) {
		t.Fatalf("resumed hand-off %+v, want %+v", resumed.Handoff, h)
	}
	// The connection that lost the session cannot hand it off.
	if err := s.HandOff(ctx, rec, h, []byte(`{}`), nil); !errors.Is(err, ErrFenced) {
		t.Fatalf("a fenced hand-off: %v, want ErrFenced", err)
	}

	found, err := s.EndHandoff(ctx, rec.ID, []byte(`{"kind":"event","event":"handback"}`))
	if err != nil || !found {
		t.Fatalf("hand back: %v %v", found, err)
	}
	tl, err := s.Timeline(ctx, rec.ID)
	if err != nil || tl.Handoff.Active() {
		t.Fatalf("after the hand-back the record says %+v (%v)", tl.Handoff, err)
	}
	want := []string{`{"kind":"event","event":"handoff"}`, `{"kind":"event","event":"handback"}`}
	if !slices.Equal(tl.Entries, want) {
		t.Errorf("timeline %q, want %q", tl.Entries, want)
	}
	msgs, err := b.client.XRange(ctx, stream, "-", "+").Result()
	if err != nil || len(msgs) != 2 || msgs[0].Values["record"] != `{"event":"handoff"}` ||
		msgs[1].Values["record"] != `{"kind":"event","event":"handback"}` || msgs[1].Values["session"] != rec.ID {
		t.Errorf("stream %v (%v), want the hand-off and the hand-back", msgs, err)
	}
	if _, err := s.EndHandoff(ctx, rec.ID, []byte(`{}`)); !errors.Is(err, ErrNotHandedOff) {
		t.Errorf("a second hand-back: %v, want ErrNotHandedOff", err)
	}
	if found, err := s.EndHandoff(ctx, "s_unknown", []byte(`{}`)); err != nil || found {
		t.Errorf("hand-back of an unknown session: %v %v", found, err)
	}
	// Refusals (fenced, not handed off) are outcomes, not Redis failures.
	if len(failures) != 0 {
		t.Errorf("Observe saw failures %v, want none", failures)
	}
}

func TestAnnounceTellsAHandBack(t *testing.T) {
	var w ownerLog
	announce(&w, "handback s_1")
	announce(&w, "handback {bad}")
	if owners, _ := w.state(); !slices.Equal(owners, []string{"handback:s_1"}) {
		t.Errorf("heard %v, want the one valid hand-back", owners)
	}
}
