//go:build race

package session_test

// raceEnabled: the race detector is on. Its sync.Pool drops a quarter of
// what is put, at random, so pooled buffers are allocated anew now and
// then: allocation counts hold only without it.
const raceEnabled = true
