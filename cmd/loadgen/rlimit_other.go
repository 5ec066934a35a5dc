//go:build !unix

package main

// raiseFileLimit leaves the limit as it is where there is no RLIMIT_NOFILE.
func raiseFileLimit(uint64) error { return nil }
