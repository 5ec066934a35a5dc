// Package clock is the gateway's one clock: every production read of the
// time and every timer goes through a Clock, injected once at assembly
// (gateway), so a test can stand time still or move it by hand
// (Fake). This file is the only one in the production packages that reads
// the time package's clock directly.
package clock

import "time"

// Clock is the time the gateway goes by.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed on this
	// clock, unless the timer is stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a running AfterFunc.
type Timer interface{ Stop() bool }

// System is the time package's clock. Its zero value is ready; calls on
// it are direct (no interface), so a hot path that measures the network
// (relay latency samples, write deadlines, liveness) pays nothing for it.
// Those go by System on purpose, not by the injected Clock: they measure
// real elapsed time, and a test's clock standing still must not stop them.
type System struct{}

// Wall is the system clock, named at the reads that measure real time on
// purpose (see System).
var Wall System

// Now is time.Now.
func (System) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (System) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// FuncTimer is time.AfterFunc with the *time.Timer (Reset) of it.
func (System) FuncTimer(d time.Duration, f func()) *time.Timer { return time.AfterFunc(d, f) }

// Since is time.Since.
func (System) Since(t time.Time) time.Duration { return time.Since(t) }

// Until is time.Until.
func (System) Until(t time.Time) time.Duration { return time.Until(t) }

// NewTimer is time.NewTimer.
func (System) NewTimer(d time.Duration) *time.Timer { return time.NewTimer(d) }

// NewTicker is time.NewTicker.
func (System) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }

// After is time.After.
func (System) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Sleep is time.Sleep.
func (System) Sleep(d time.Duration) { time.Sleep(d) }

// Or is c, or System when c is nil: a package's default.
func Or(c Clock) Clock {
	if c == nil {
		return System{}
	}
	return c
}
