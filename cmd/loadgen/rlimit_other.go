//go:build !unix

package main

// checkFileLimit checks nothing where there is no RLIMIT_NOFILE.
func checkFileLimit(uint64) error { return nil }
