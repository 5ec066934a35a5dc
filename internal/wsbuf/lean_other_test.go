//go:build !unix

package wsbuf

// leanSizes: no lean reader here (lean_unix_test.go).
var leanSizes []int

// holdsBuffer: no lean connection here holds anything of its own.
func holdsBuffer(*leanConn) bool { return false }
