package session

import (
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/store"
)

// Input is refused while a block lasts and only then: from the block's
// recording to its end, again after an operator lifted it and a new one
// came, and never before the first.
func TestStateBlockedFromItsRecordingToItsEnd(t *testing.T) {
	clk := clock.NewFake(t0)
	s := &state{now: clk.Now}
	blocked := func() bool { _, b := s.blocked(); return b }
	if blocked() {
		t.Fatal("blocked before any block")
	}
	if !s.setBlock(store.Block{Until: t0.Add(time.Minute)}) || !blocked() {
		t.Fatal("a block for a minute does not refuse input")
	}
	if until, _ := s.blocked(); !until.Equal(t0.Add(time.Minute)) {
		t.Fatalf("blocked until %v, want %v", until, t0.Add(time.Minute))
	}
	clk.Advance(time.Minute)
	if blocked() {
		t.Fatal("still blocked once the block ended")
	}
	if !s.setBlock(store.Block{Until: t0.Add(2 * time.Minute)}) || !blocked() {
		t.Fatal("a second block does not refuse input")
	}
	s.liftBlock()
	if blocked() {
		t.Fatal("blocked after the block was lifted")
	}
	if !s.setBlock(store.Block{Until: t0.Add(3 * time.Minute)}) || !blocked() {
		t.Fatal("a block after a lift does not refuse input")
	}
}
