package session

import "testing"

func TestNewerOwnerEndsTheHoldOlderOnesDoNot(t *testing.T) {
	var o ownership
	if o.current() {
		t.Fatal("a connection whose session is not loaded holds it")
	}
	if !o.take(3) || !o.current() || o.epoch() != 3 {
		t.Fatalf("took epoch 3: current %v, epoch %d; want held at 3", o.current(), o.epoch())
	}
	if o.announce(2) || o.announce(3) {
		t.Fatal("an older or its own announcement ended the hold")
	}
	if !o.announce(4) || o.current() {
		t.Fatal("a newer owner (4) did not end the hold of 3")
	}
}

// A resume racing another: the store announces the other's newer epoch
// before this connection learns its own.
func TestOwnerAnnouncedBeforeTheOwnEpochIsKnownWinsWhenItArrives(t *testing.T) {
	var o ownership
	if o.announce(5) {
		t.Fatal("an announcement ended a hold not taken yet")
	}
	o.announce(4) // late and older: the newest is kept
	if o.take(4) || o.current() {
		t.Fatal("took epoch 4 after 5 was announced: still holds the session")
	}
	var p ownership
	p.announce(4)
	if !p.take(5) || !p.current() {
		t.Fatal("took epoch 5 after 4 was announced: lost the session")
	}
}
