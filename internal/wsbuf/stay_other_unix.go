//go:build unix && (!linux || 386)

package wsbuf

// stay: a reader stays inside one raw read only where the kernel says
// what a read left (Linux's TCP_INQ, stay_linux.go; not on 386, whose
// recvmsg goes through socketcall); here every fill is its own raw read.
type stay struct{}

func (*sockReader) stayInside() {}

func (c *sockReader) pull() (int, error) { return c.n, c.rerr }

func (*sockReader) leave() {}

func (*sockReader) kick() {}

func (*stay) recv(int, []byte) (int, error) { return 0, nil }
