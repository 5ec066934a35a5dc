//go:build !unix

package wsbuf

import (
	"bufio"
	"net"
)

const heldSize = 4 << 10

type leanConn struct {
	net.Conn
	br *bufio.Reader
}

// newLeanConn leaves the connection as it is where there is no raw socket
// to wait on.
func newLeanConn(net.Conn, *bufio.Reader) (*leanConn, bool) { return nil, false }

// Park never arms: there is no lean connection.
func (*Idle) Park() bool { return false }

// Wait returns at once.
func (*Idle) Wait() {}
