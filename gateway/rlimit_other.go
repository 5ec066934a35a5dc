//go:build !unix

package gateway

// openFileLimit is unknown here (0): the connection cap takes a fixed default.
func openFileLimit() uint64 { return 0 }
