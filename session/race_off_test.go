//go:build !race

package session_test

// raceEnabled: the race detector is on (see race_on_test.go).
const raceEnabled = false
