package session

import (
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/internal/clock"
)

// fakeExpiry is an expiry on a fake clock standing at t0, with a leeway of
// 5 s; expired counts its runs.
func fakeExpiry() (*expiry, *clock.Fake, *int) {
	clk := clock.NewFake(t0)
	var e expiry
	n := new(int)
	e.init(5*time.Second, clk, func() { *n++ })
	return &e, clk, n
}

func TestTokenExpiresAtItsExpiryPlusTheLeeway(t *testing.T) {
	e, clk, expired := fakeExpiry()
	e.arm(t0.Add(10 * time.Second))
	clk.Advance(15*time.Second - time.Millisecond)
	if *expired != 0 {
		t.Fatal("expired before the token's expiry plus the leeway")
	}
	clk.Advance(time.Millisecond)
	if *expired != 1 {
		t.Fatalf("expired %d times at the token's expiry plus the leeway, want once", *expired)
	}
}

func TestRefreshMovesTheDeadlineToTheFreshToken(t *testing.T) {
	e, clk, expired := fakeExpiry()
	e.arm(t0.Add(10 * time.Second))
	clk.Advance(8 * time.Second)
	e.arm(t0.Add(time.Hour)) // auth with a fresh token
	clk.Advance(time.Minute)
	if *expired != 0 {
		t.Fatal("the old token's deadline still ran after a refresh")
	}
	if n := clk.Timers(); n != 1 {
		t.Fatalf("%d timers armed after a refresh, want the fresh token's one", n)
	}
	clk.Advance(time.Hour)
	if *expired != 1 {
		t.Fatalf("expired %d times past the fresh token's expiry, want once", *expired)
	}
}

func TestTokenWithoutExpiryNeverExpires(t *testing.T) {
	e, clk, expired := fakeExpiry()
	e.arm(time.Time{})
	if n := clk.Timers(); n != 0 {
		t.Fatalf("%d timers for a token that does not expire", n)
	}
	e.arm(t0.Add(time.Second))
	e.arm(time.Time{}) // a refresh with a token that does not expire
	clk.Advance(24 * time.Hour)
	if *expired != 0 {
		t.Fatal("a connection expired after a refresh with a token that does not expire")
	}
}

func TestEndedConnectionNeitherExpiresNorArmsAgain(t *testing.T) {
	e, clk, expired := fakeExpiry()
	e.arm(t0.Add(time.Second))
	e.stop()
	e.arm(t0.Add(2 * time.Second)) // a late auth after the end
	clk.Advance(time.Hour)
	if *expired != 0 || clk.Timers() != 0 {
		t.Fatalf("expired %d times, %d timers armed after the connection ended", *expired, clk.Timers())
	}
}
