//go:build unix && (!linux || 386)

package wsbuf

import "net"

// stay: a reader stays inside one raw read only where the kernel says
// what a read left (Linux's TCP_INQ, stay_linux.go; not on 386, whose
// recvmsg goes through socketcall); here every fill is its own raw read.
type stay struct{}

func (*sockReader) stayInside() {}

func (*sockReader) stayOn() *stay { return nil }

func (*sockReader) settled() bool { return true }

func (*sockReader) enter(net.Conn) bool { return false }

func (*sockReader) exit() {}

func (*sockReader) wake() {}

func (*sockReader) pull(*stay) (int, bool, error) { return 0, true, nil }

func (*sockReader) closeStay() {}

func (*sockReader) kick() {}

func (*stay) recv(int, []byte) (int, error) { return 0, nil }
