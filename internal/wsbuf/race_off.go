//go:build !race

package wsbuf

// raceEnabled: built with the race detector (see stay.recv).
const raceEnabled = false
