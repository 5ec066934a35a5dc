//go:build !unix

package wsbuf

import (
	"bufio"
	"net"
)

const heldSize = 4 << 10

type leanConn struct{ net.Conn }

// newLeanConn leaves the connection as it is where there is no raw socket
// to wait on.
func newLeanConn(net.Conn, *bufio.Reader) (*leanConn, bool) { return nil, false }
