//go:build !unix

package main

// openFileLimit is unknown here (0): the connection cap takes a fixed default.
func openFileLimit() uint64 { return 0 }
